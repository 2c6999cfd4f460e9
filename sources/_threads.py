"""Blocking work in worker threads that a deadline can stop: a SQLite query still running
when the caller's scope is cancelled is interrupted (`Connection.interrupt()`), not
abandoned, so no statement outlives the turn that asked for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.lowlevel
from anyio.lowlevel import RunVar

T = TypeVar("T")

_UNBOUNDED = 1_000_000


async def run_sync_interruptible(
    fn: Callable[[], T],
    *,
    interrupt: Callable[[], None],
    limiter: anyio.CapacityLimiter,
) -> T:
    """Run `fn` in a worker thread behind `limiter`; on cancellation call `interrupt`
    (e.g. `conn.interrupt`), wait for the thread to finish, then re-raise the cancellation.

    Waiting for a limiter token is cancellable; once the thread runs, the caller waits for
    it, so the thread never outlives the call.
    """
    async with limiter:
        finished = False

        async def watchdog() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                if not finished:
                    interrupt()

        error: Exception | None = None
        result: T | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(watchdog)
            with anyio.CancelScope(shield=True):
                try:
                    result = await anyio.to_thread.run_sync(fn, limiter=_thread_limiter())
                except Exception as exc:  # noqa: BLE001 - re-raised below, after cancellation
                    error = exc
            finished = True
            tg.cancel_scope.cancel()
        # The thread is done; if our caller was cancelled meanwhile, that wins.
        await anyio.lowlevel.checkpoint_if_cancelled()
        if error is not None:
            raise error
        return result  # type: ignore[return-value]


_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("broker_thread_limiter")


def _thread_limiter() -> anyio.CapacityLimiter:
    # Capacity is enforced by the caller's limiter; this one only avoids anyio's default 40.
    # One per event loop: a limiter belongs to the backend that created it.
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(_UNBOUNDED)
        _LIMITER.set(limiter)
        return limiter
