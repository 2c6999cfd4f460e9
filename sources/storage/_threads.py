"""Blocking work in worker threads that a deadline can stop: a SQLite query still running
when the caller's scope is cancelled is interrupted (`Connection.interrupt()`), not
abandoned, so no statement outlives the turn that asked for it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio
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
    it, so the thread never outlives the call. The usual path is one thread hand-off (no
    watchdog task): the wait for the thread is abandoned at cancellation only to interrupt
    the thread and wait for it again, shielded. The interrupt itself runs in a worker thread
    too: it may block (PostgreSQL's cancel is a round trip to the server), and the event loop
    serves other turns meanwhile.
    """
    async with limiter:
        job = Job(fn)
        try:
            return await anyio.to_thread.run_sync(job.run, abandon_on_cancel=True, limiter=thread_limiter())
        except anyio.get_cancelled_exc_class():
            await job.abandon_and_stop(interrupt)
            raise


class Job(Generic[T]):
    """`fn` as a worker thread runs it, and whether it started: a job abandoned before it
    started never runs; one that started is waited for."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._state = "new"
        self._finished = False  # fn returned or raised
        self._done: threading.Event | None = None  # made only when someone waits: most never do

    def run(self) -> T:
        with self._lock:
            if self._state == "abandoned":
                raise _AbandonedError
            self._state = "running"
        try:
            return self._fn()
        finally:
            with self._lock:
                self._finished = True
                done = self._done
            if done is not None:
                done.set()

    def stop(self, interrupt: Callable[[], None]) -> None:
        """Interrupt the running job and wait until its thread is done with it."""
        interrupt()
        with self._lock:
            if self._finished:
                return
            done = self._done = self._done or threading.Event()
        done.wait()

    async def abandon_and_stop(self, interrupt: Callable[[], None]) -> None:
        """At the caller's cancellation: a job not started never runs; a started one is
        interrupted and waited for, shielded (the interrupt in a worker thread: it may block)."""
        if self.abandon():
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.stop, interrupt, limiter=thread_limiter())

    def abandon(self) -> bool:
        """Mark the job abandoned; True if it had started (its thread must be waited for)."""
        with self._lock:
            started = self._state == "running"
            self._state = "abandoned"
        return started


class _AbandonedError(Exception):
    """The job was abandoned before its thread started it (the result is never read)."""


_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("broker_thread_limiter")


def thread_limiter() -> anyio.CapacityLimiter:
    # Capacity is enforced by the caller's limiter; this one only avoids anyio's default 40.
    # One per event loop: a limiter belongs to the backend that created it.
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(_UNBOUNDED)
        _LIMITER.set(limiter)
        return limiter
