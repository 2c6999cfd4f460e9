"""A store's read lane: the blocking reads of its sources, queued to a few persistent worker
threads that run them back to back.

Behind a one-token limiter (SQLite: `Engine.read_threads`), reads through anyio's worker
threads took turns through the event loop: each waited for the loop to hand the token on and
start the next thread job, about 0.3 ms a read on 2 cores, eight reads a turn. A lane queues
every read at once; its thread runs them one after another and wakes each caller as its own
read ends. Cancellation stays per read: a queued read is dropped, a running one interrupted
and waited for; the other reads go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import anyio
import attrs
import trio

from broker import BrokerClosedError

from ._threads import Job

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")


@attrs.define(eq=False)
class ReadLane:
    """`threads` persistent worker threads running the queued reads of one store in order.

    The threads start at the first read and end when the lane is closed (or dropped).
    """

    threads: int = attrs.field(validator=attrs.validators.ge(1))
    _pool: ThreadPoolExecutor | None = attrs.field(default=None, init=False)
    _pid: int = attrs.field(factory=os.getpid, init=False)  # a forked child starts threads of its own
    _closed: bool = attrs.field(default=False, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    async def run(self, fn: Callable[[], T], *, interrupt: Callable[[], None]) -> T:
        """`fn()` in a thread of the lane; on cancellation, a queued call never runs and a
        running one is interrupted (`interrupt`) and waited for, then the cancellation is
        re-raised.

        Raises:
            BrokerClosedError: the lane was closed before `fn` ran.

        """
        job = Job(fn)
        wake = _ThreadWake()
        future = self._submit(job)
        future.add_done_callback(wake.set)
        try:
            await wake.wait()
        except anyio.get_cancelled_exc_class():
            await job.abandon_and_stop(interrupt)
            raise
        try:
            return future.result()
        except CancelledError:
            raise BrokerClosedError("the store was closed before this read ran") from None

    def close(self) -> None:
        """Drop the queued reads (their callers get BrokerClosedError); let the threads end."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _submit(self, job: Job[T]) -> Future[T]:
        with self._lock:
            if self._closed:
                raise BrokerClosedError("the store is closed")
            if self._pid != os.getpid():  # forked: the parent's threads do not exist here
                self._pool, self._pid = None, os.getpid()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.threads, thread_name_prefix="context-broker-read"
                )
            return self._pool.submit(job.run)


class _ThreadWake:
    """An event of the running loop that another thread may set (without waiting for the loop)."""

    def __init__(self) -> None:
        self._event = anyio.Event()
        try:
            self._post: Callable[[Callable[[], object]], object] = (
                asyncio.get_running_loop().call_soon_threadsafe
            )
        except RuntimeError:  # not asyncio: trio
            self._post = trio.lowlevel.current_trio_token().run_sync_soon

    def set(self, _done: object = None) -> None:
        """Set the event from any thread; nothing if the loop has ended."""
        with contextlib.suppress(RuntimeError):  # the loop closed, or trio's run finished
            self._post(self._event.set)

    async def wait(self) -> None:
        await self._event.wait()


__all__ = ["ReadLane"]
