"""The `context-broker` command line (`python -m context_broker`), part of the application:
the composition root that wires `broker` to `sources`.

stdout carries only each command's result; logs go to stderr (or --trace-file) as one compact
JSON object per line. Errors exit with status 2, one line per error, never a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import structlog

from broker import BrokerError, ValidationError

from . import _logging
from ._app import EXIT_USAGE, App, UsageError
from ._options import field_lines, option_errors
from ._parser import build_parser

logger = structlog.get_logger(__name__)

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left


def main(argv: Sequence[str] | None = None) -> int:  # noqa: PLR0911 - one return per exit status
    """Run the CLI; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if option_errors(args):
        _lines(option_errors(args))
        return EXIT_USAGE
    try:
        trace = _logging.configure(level=args.log_level, trace_file=args.trace_file)
    except OSError as exc:  # a directory, a missing directory, no permission
        sys.stderr.write(f"error: --trace-file: {exc.filename or args.trace_file}: {exc.strerror or exc}\n")
        return EXIT_USAGE
    app = App(args=args)
    try:
        status: int = args.handler(args, app)
    except UsageError as exc:
        _lines(exc.lines)
        return EXIT_USAGE
    except ValidationError as exc:
        _lines(field_lines(exc.errors, getattr(args, "field_flags", {})))
        return EXIT_USAGE
    except BrokerError as exc:
        _lines([f"error: {exc}"])
        return EXIT_USAGE
    except KeyboardInterrupt:
        _lines(["interrupted"])
        return 130
    except BrokenPipeError:  # the reader left (`... | head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so exit's flush cannot fail
        return EXIT_BROKEN_PIPE
    finally:
        app.close()
        if trace is not None:
            trace.close()
    return status


def _lines(lines: Sequence[str]) -> None:
    for line in lines:
        sys.stderr.write(line.rstrip("\n") + "\n")


__all__ = ["main"]
