"""The loggers of the `broker` and `sources` libraries: structured events that stay silent
unless the host configured logging.

A library never configures logging, and structlog unconfigured prints every event, debug
included, on stdout: a host that set nothing up would get about fifteen lines per turn mixed
into its own output. So each event goes one of two ways, decided when it is emitted:

- the host configured structlog (`structlog.configure`, as the CLI does, or
  `structlog.testing.capture_logs`): through the host's processors, exactly as
  `structlog.get_logger(name)` would;
- otherwise: to the standard `logging` logger of the emitting module (`broker._gather`,
  `sources._store`, ...), whose package loggers carry a `NullHandler`. Silent by default; with
  the host's handlers the message is the event name and each field is an attribute of the
  record (structlog's `ProcessorFormatter` with `ExtraAdder` turns it back into the event).

Event names are dotted and stable (`turn.completed`, `source.failed`) on both paths.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs
import structlog

_METHODS = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
}
# Attributes of a LogRecord that `extra` must not overwrite (logging raises KeyError).
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _frozen_dict(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return dict(value)


@attrs.frozen
class QuietLogger:
    """A structlog-style logger (`bind`, `debug` ... `error`) that is silent unless asked."""

    name: str
    context: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_dict)

    def bind(self, **fields: Any) -> QuietLogger:  # noqa: ANN401 - event fields are any JSON value
        """A logger whose events also carry `fields`."""
        return QuietLogger(self.name, {**self.context, **fields})

    def debug(self, event: str, **fields: Any) -> None:  # noqa: ANN401
        """Emit `event` at debug level."""
        self._emit(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:  # noqa: ANN401
        """Emit `event` at info level."""
        self._emit(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:  # noqa: ANN401
        """Emit `event` at warning level."""
        self._emit(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:  # noqa: ANN401
        """Emit `event` at error level."""
        self._emit(logging.ERROR, event, fields)

    def _emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        if structlog.is_configured():
            method = getattr(structlog.get_logger(self.name), _METHODS[level])
            method(event, **self.context, **fields)
            return
        std = logging.getLogger(self.name)
        if not std.isEnabledFor(level):
            return
        exc_info = fields.pop("exc_info", None)
        extra = {_safe(k): v for k, v in {**self.context, **fields}.items()}
        std.log(level, event, exc_info=exc_info, extra=extra, stacklevel=3)


def _safe(key: str) -> str:
    return f"field_{key}" if key in _RESERVED else key


def get_logger(name: str) -> QuietLogger:
    """The logger of module `name` (pass `__name__`)."""
    return QuietLogger(name)


def add_null_handler(package: str) -> None:
    """Give a package logger a NullHandler, once (what a library does, per the logging HOWTO)."""
    logger = logging.getLogger(package)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


__all__ = ["QuietLogger", "add_null_handler", "get_logger"]
