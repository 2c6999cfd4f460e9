"""The host's turn observer, contained: an observer that raises never fails a turn.

Every call into the observer (`turn()`, entering and leaving it, `selection`, `completed`) is
guarded: an exception is logged (`observer.failed`, at warning, with the step) and the turn
goes on as if nobody observed that step. Cancellation and other BaseExceptions are not
contained. An observer cannot swallow the turn's own exception either.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import attrs

from .log import get_logger

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._model import Context, SelectionResult, Turn
    from .abc import TurnObserver, TurnRecorder

logger = get_logger(__name__)

OBSERVER_FAILED = "observer.failed"


class NoRecorder:
    """What the broker reports to when nobody observes."""

    def selection(self, result: SelectionResult, *, elapsed_ms: float) -> None:
        """Nothing to record."""

    def completed(self, context: Context) -> None:
        """Nothing to record."""


def _failed(turn: Turn, step: str, error: Exception) -> None:
    logger.warning(OBSERVER_FAILED, turn_id=turn.turn_id, step=step, exc_info=error)


@attrs.define(eq=False)
class _Guarded:
    """A recorder whose exceptions are logged, not raised."""

    _inner: TurnRecorder
    _turn: Turn

    def selection(self, result: SelectionResult, *, elapsed_ms: float) -> None:
        """Pass the selection on."""
        try:
            self._inner.selection(result, elapsed_ms=elapsed_ms)
        except Exception as exc:  # noqa: BLE001 - an observer never fails a turn
            _failed(self._turn, "selection", exc)

    def completed(self, context: Context) -> None:
        """Pass the context on."""
        try:
            self._inner.completed(context)
        except Exception as exc:  # noqa: BLE001 - an observer never fails a turn
            _failed(self._turn, "completed", exc)


@contextlib.contextmanager
def observed(observer: TurnObserver | None, turn: Turn) -> Iterator[TurnRecorder]:
    """Around one turn: the observer's recorder, guarded (or `NoRecorder` without one, or when
    the observer fails to start)."""
    if observer is None:
        yield NoRecorder()
        return
    step = "turn"
    try:
        manager = observer.turn(turn)
        step = "enter"
        recorder = manager.__enter__()
    except Exception as exc:  # noqa: BLE001 - an observer never fails a turn
        _failed(turn, step, exc)
        yield NoRecorder()
        return
    error: BaseException | None = None
    try:
        yield _Guarded(recorder, turn)
    except BaseException as exc:
        error = exc
        raise
    finally:
        try:
            manager.__exit__(type(error) if error else None, error, error.__traceback__ if error else None)
        except Exception as exc:  # noqa: BLE001 - an observer never fails a turn
            _failed(turn, "exit", exc)
