"""The CLI is a host: it configures structlog as compact JSON lines on stderr or a file."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TextIO

import structlog

LEVELS = ("debug", "info", "warning", "error")


def configure(*, level: str, trace_file: str | None) -> TextIO | None:
    """JSON lines to stderr, or to `trace_file` (appended); returns the file to close."""
    stream: TextIO = sys.stderr
    opened: TextIO | None = None
    if trace_file:
        opened = Path(trace_file).expanduser().open("a", encoding="utf-8")
        stream = opened
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(separators=(",", ":"), ensure_ascii=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.WriteLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    return opened
