"""Model runs in flight, and the process's exit waiting for them.

A turn's deadline abandons blocking work it cannot interrupt: an embedding already inside
onnxruntime finishes in its worker thread after the turn has returned. If the process exits
meanwhile, the interpreter's teardown destroys onnxruntime's native state under that run, and
the C++ runtime aborts the process ("terminate called without an active exception", exit code
134) after the command had printed its answer. So every model run is counted, and at exit the
process waits for the runs in flight (at most `EXIT_WAIT` seconds; a run takes milliseconds) and
refuses new ones from other threads (the exiting thread's own, an atexit handler's, run before the
teardown). A forked child starts with no run in flight.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

EXIT_WAIT: Final = 10.0
"""Seconds the exiting process waits for model runs in flight."""

_idle = threading.Condition()
_running = 0
_exiting: int | None = None
"""The ident of the thread running the exit hooks, once the process exits."""


class ExitingError(RuntimeError):
    """A model run asked for while the process exits (by work a deadline abandoned)."""


@contextlib.contextmanager
def model_run() -> Iterator[None]:
    """Count one model run while it lasts; ExitingError once the process exits."""
    global _running  # noqa: PLW0603 - the process's one count
    with _idle:
        if _exiting is not None and _exiting != threading.get_ident():
            raise ExitingError("the process is exiting: no new model run")
        _running += 1
    try:
        yield
    finally:
        with _idle:
            _running -= 1
            if _running == 0:
                _idle.notify_all()


def wait_idle(timeout: float) -> bool:
    """Wait until no model run is in flight (at most `timeout` seconds); whether none is."""
    with _idle:
        return _idle.wait_for(lambda: _running == 0, timeout)


def _at_exit() -> None:
    global _exiting  # noqa: PLW0603 - the process's one flag
    with _idle:
        _exiting = threading.get_ident()
    wait_idle(EXIT_WAIT)


def _after_fork() -> None:
    """A forked child holds none of its parent's runs (nor its lock, if another thread held it)."""
    global _idle, _running, _exiting
    _idle, _running, _exiting = threading.Condition(), 0, None


atexit.register(_at_exit)
os.register_at_fork(after_in_child=_after_fork)
