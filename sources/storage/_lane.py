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
import collections
import contextlib
import functools
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

import anyio
import attrs

from broker import BrokerClosedError

from ._threads import Job

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")


FLUSH_AFTER: Final = 0.001
"""Seconds a finished read's caller may be left unwoken while the lane runs reads of the same
event loop queued behind it: its callers then wake together, once no read of their loop waits
or this long after the first of them finished (longer only while the running read holds the
GIL: up to the interpreter's switch interval, `sys.getswitchinterval()`)."""


@attrs.define(eq=False)
class ReadLane:
    """`threads` persistent worker threads running the queued reads of one store in order.

    The threads start at the first read and end when the lane is closed (or dropped).
    """

    threads: int = attrs.field(validator=attrs.validators.ge(1))
    _queue: _Queue | None = attrs.field(default=None, init=False)
    _pid: int = attrs.field(factory=os.getpid, init=False)  # a forked child starts threads of its own
    _closed: bool = attrs.field(default=False, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _finalizer: weakref.finalize[[], ReadLane] | None = attrs.field(default=None, init=False)

    async def run(self, fn: Callable[[], T], *, interrupt: Callable[[], None]) -> T:
        """`fn()` in a thread of the lane; on cancellation, a queued call never runs and a
        running one is interrupted (`interrupt`) and waited for, then the cancellation is
        re-raised.

        Raises:
            BrokerClosedError: the lane was closed before `fn` ran.

        """
        read = _Read(Job(fn), _ThreadWake())
        queue = self._submit(read)
        try:
            await read.wake.wait()
        except anyio.get_cancelled_exc_class():
            queue.discard(read)  # a read never started leaves the queue: it holds no wake back
            await read.job.abandon_and_stop(interrupt)
            raise
        return read.outcome()

    def close(self) -> None:
        """Drop the queued reads (their callers get BrokerClosedError); let the threads end."""
        with self._lock:
            self._closed = True
            queue, self._queue = self._queue, None
        if queue is not None:
            queue.close()

    def _submit(self, read: _Read[T]) -> _Queue:
        with self._lock:
            if self._closed:
                raise BrokerClosedError("the store is closed")
            if self._pid != os.getpid():  # forked: the parent's threads do not exist here
                self._forget_parents_queue()
            if self._queue is None:
                self._queue = _Queue(self.threads)
                self._finalizer = weakref.finalize(self, self._queue.close)  # a dropped lane ends its threads
            self._queue.put(read)
            return self._queue

    def _forget_parents_queue(self) -> None:
        """In a forked child: drop the parent's queue without closing it (its lock may have
        been held at the fork, and its wakes belong to the parent's loops)."""
        if self._finalizer is not None:
            self._finalizer.detach()
        self._queue, self._finalizer, self._pid = None, None, os.getpid()


class _Read(Generic[T]):
    """One queued read: its job, the caller's wake, and its outcome once it ran (or was dropped)."""

    def __init__(self, job: Job[T], wake: _ThreadWake) -> None:
        self.job, self.wake = job, wake
        self._result: T | None = None
        self._error: BaseException | None = None

    def execute(self) -> None:
        try:
            self._result = self.job.run()
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller, as a future does
            self._error = exc

    def drop(self) -> None:
        self._error = BrokerClosedError("the store was closed before this read ran")

    def outcome(self) -> T:
        if self._error is not None:
            try:
                raise self._error
            finally:
                self._error = None  # no cycle through the traceback
        return cast("T", self._result)


class _Queue:
    """The reads of a lane and the threads running them.

    The callers of finished reads are woken together, not one by one: while more reads of
    their event loop wait, for about `FLUSH_AFTER`. A caller's loop thread woken after each
    read took the GIL back from the lane's thread at every read (eight a turn), and the two
    threads' hand-offs across cores cost a lexical turn about a fifth of its time at 100k
    memories.
    """

    def __init__(self, threads: int) -> None:
        self._reads: collections.deque[_Read[Any]] = collections.deque()
        self._finished: list[_ThreadWake] = []
        self._since = 0.0
        lock = threading.Lock()
        self._queued = threading.Condition(lock)  # the workers wait for reads
        self._deferred = threading.Condition(lock)  # the flusher waits for wakes held back
        self._closed = False
        for i in range(threads):
            name = f"context-broker-read_{i}"
            threading.Thread(target=self._work, name=name, daemon=True).start()
        threading.Thread(target=self._flush_late, name="context-broker-read-wake", daemon=True).start()

    def put(self, read: _Read[Any]) -> None:
        with self._queued:
            self._reads.append(read)
            self._queued.notify()

    def discard(self, read: _Read[Any]) -> None:
        """Take a read its caller abandoned out of the queue, if no worker took it yet."""
        with self._queued, contextlib.suppress(ValueError):
            self._reads.remove(read)

    def close(self) -> None:
        with self._queued:
            self._closed = True
            dropped = list(self._reads)
            self._reads.clear()
            self._queued.notify_all()
            self._deferred.notify_all()
        for read in dropped:
            read.drop()
        _wake_all([read.wake for read in dropped])

    def _work(self) -> None:
        while True:
            with self._queued:
                while not self._reads and not self._closed:
                    self._queued.wait()
                if not self._reads:
                    return
                read = self._reads.popleft()
            read.execute()
            _wake_all(self._finish(read.wake))

    def _finish(self, wake: _ThreadWake) -> list[_ThreadWake]:
        """Record a finished read; the wakes due now: those of loops with no read queued, and
        all of them once the first held back finished `FLUSH_AFTER` ago."""
        with self._queued:
            now = time.monotonic()
            held_before = bool(self._finished)
            if not held_before:
                self._since = now
            self._finished.append(wake)
            if now - self._since >= FLUSH_AFTER:
                return self._take()
            waiting = {read.wake.post for read in self._reads}
            due = [w for w in self._finished if w.post not in waiting]
            if due:
                self._finished = [w for w in self._finished if w.post in waiting]
            if self._finished and not held_before:
                self._deferred.notify()  # the flusher times the first wake held back
            return due

    def _flush_late(self) -> None:
        """Wake the callers of reads finished `FLUSH_AFTER` ago behind a read still running."""
        while True:
            with self._deferred:
                while not self._finished and not self._closed:
                    self._deferred.wait()
                if self._closed and not self._finished:
                    return
                left = self._since + FLUSH_AFTER - time.monotonic()
                due = self._take() if left <= 0 else []
                if not due:
                    self._deferred.wait(left)
            _wake_all(due)

    def _take(self) -> list[_ThreadWake]:
        due, self._finished = self._finished, []
        return due


class _ThreadWake:
    """An event of the running loop that another thread may set (without waiting for the loop)."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        try:
            self.post: Callable[[Callable[[], object]], object] = (
                asyncio.get_running_loop().call_soon_threadsafe
            )
        except RuntimeError:  # not asyncio: trio, which its host has imported already
            import trio  # noqa: PLC0415 - asyncio hosts never import it (about 50 ms)

            self.post = trio.lowlevel.current_trio_token().run_sync_soon

    async def wait(self) -> None:
        await self.event.wait()


def _wake_all(wakes: list[_ThreadWake]) -> None:
    """Set many wakes with one post to each loop they belong to (one wake-up of its thread)."""
    by_loop: dict[Callable[[Callable[[], object]], object], list[anyio.Event]] = {}
    for wake in wakes:
        by_loop.setdefault(wake.post, []).append(wake.event)
    for post, events in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop closed, or trio's run finished
            post(functools.partial(_set_all, events))


def _set_all(events: list[anyio.Event]) -> None:
    for event in events:
        event.set()


__all__ = ["ReadLane"]
