"""The CLI is a host: it configures structlog as compact JSON lines on stderr or a file.

`--log-level` filters log events; a trace event (`turn.completed`) written to `--trace-file`
passes whatever the level, so the trace file always holds every turn `trace-stats` reads. The
turn `explain` runs to learn what admission drops is not an agent's turn: a trace file does not
get its event (`EXPLAINING`); stderr at `--log-level info` still shows it.
"""

from __future__ import annotations

import errno
import logging
import sys
from collections.abc import Collection, MutableMapping
from pathlib import Path
from typing import Any, TextIO

import structlog

from broker import TURN_COMPLETED

LEVELS = ("debug", "info", "warning", "error")
TRACE_EVENTS = frozenset({TURN_COMPLETED})
"""The events a trace file receives at any log level."""

EXPLAINING = "cli_explaining"
"""A context variable bound (True) while `explain` runs its turn: written to a trace file, that
turn's `turn.completed` is dropped, not counted among the agent's turns by a log pipeline or
`trace-stats`."""

_NUMBERS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure(*, level: str, trace_file: str | None) -> TextIO | None:
    """JSON lines to stderr, or to `trace_file` (appended); returns the file to close."""
    stream: TextIO = sys.stderr
    opened: TextIO | None = None
    if trace_file:
        opened = _appended(Path(trace_file).expanduser())
        stream = opened
    structlog.configure(
        processors=[
            level_filter(level, keep=TRACE_EVENTS if trace_file else ()),
            structlog.contextvars.merge_contextvars,
            explaining_filter(drop=bool(trace_file)),
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(separators=(",", ":"), ensure_ascii=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            min(_NUMBERS[level], logging.INFO) if trace_file else _NUMBERS[level]
        ),
        logger_factory=structlog.WriteLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    return opened


_SQLITE_HEADER = b"SQLite format 3\x00"


def _appended(path: Path) -> TextIO:
    """The trace file opened for appending; OSError for a SQLite database (a store named as
    the trace file would have JSON lines appended to its pages)."""
    if path.is_file():
        with path.open("rb") as f:
            if f.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER:
                reason = "a SQLite database, not a trace file (nothing was written)"
                raise OSError(errno.EINVAL, reason, str(path))
    return path.open("a", encoding="utf-8")


def level_filter(level: str, *, keep: Collection[str] = ()) -> structlog.types.Processor:
    """A processor that drops events below `level`, except those named in `keep`."""
    threshold = _NUMBERS[level]

    def drop_below(
        _logger: object, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        if _NUMBERS.get(method_name, logging.ERROR) < threshold and event_dict.get("event") not in keep:
            raise structlog.DropEvent
        return event_dict

    return drop_below


def explaining_filter(*, drop: bool) -> structlog.types.Processor:
    """A processor that unmarks the events of `explain`'s turn and, with `drop`, drops its
    `turn.completed`."""

    def unmark(
        _logger: object, _method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        if event_dict.pop(EXPLAINING, False) and drop and event_dict.get("event") == TURN_COMPLETED:
            raise structlog.DropEvent
        return event_dict

    return unmark
