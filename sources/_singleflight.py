"""Per-turn values computed once however many worker threads ask for them at once.

The sources of a turn run concurrently in worker threads and need the same things: the
task's embedding, the namespace's reference. `SingleFlight` computes each key once (the
first caller computes, concurrent callers wait for it) and keeps recent results.

A waiting thread must not outlive its own deadline: inside `interruptible(check)` (which
`StoreReader` sets around every read) a wait gives up with
`sqlite3.OperationalError("interrupted")` as soon as `check()` is true, as an interrupted
read does, so a cancelled turn never waits on another turn's computation. A computation
that raises is not kept: the next caller computes afresh.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Final, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterator

K = TypeVar("K", bound="Hashable")
V = TypeVar("V")

_POLL_SECONDS: Final = 0.005
_thread = threading.local()


@contextlib.contextmanager
def interruptible(interrupted: Callable[[], bool]) -> Iterator[None]:
    """Within this block (in this thread), waits give up once `interrupted()` is true."""
    before = getattr(_thread, "interrupted", None)
    _thread.interrupted = interrupted
    try:
        yield
    finally:
        _thread.interrupted = before


def _wait(event: threading.Event) -> None:
    check: Callable[[], bool] | None = getattr(_thread, "interrupted", None)
    if check is None:
        event.wait()
        return
    while not event.wait(_POLL_SECONDS):
        if check():
            raise sqlite3.OperationalError("interrupted")


class SingleFlight(Generic[K, V]):
    """At most `size` recent values, each kept `ttl` seconds (None: until evicted)."""

    def __init__(self, *, size: int, ttl: float | None = None) -> None:
        self._size = size
        self._ttl = ttl
        self._lock = threading.Lock()
        self._done: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._pending: dict[K, threading.Event] = {}

    def get(self, key: K, compute: Callable[[], V]) -> V:
        """The kept value of `key`, or `compute()`'s (which is then kept)."""
        while True:
            with self._lock:
                hit = self._done.get(key)
                if hit is not None and (self._ttl is None or time.monotonic() - hit[0] < self._ttl):
                    self._done.move_to_end(key)
                    return hit[1]
                waiting = self._pending.get(key)
                if waiting is None:
                    mine = self._pending[key] = threading.Event()
            if waiting is not None:
                _wait(waiting)
                continue
            try:
                value = compute()
                with self._lock:
                    self._done[key] = (time.monotonic(), value)
                    self._done.move_to_end(key)
                    while len(self._done) > self._size:
                        self._done.popitem(last=False)
                return value
            finally:
                with self._lock:
                    del self._pending[key]
                mine.set()

    def holds(self, key: K) -> bool:
        """Whether a value of `key` is kept (and fresh)."""
        with self._lock:
            hit = self._done.get(key)
            return hit is not None and (self._ttl is None or time.monotonic() - hit[0] < self._ttl)

    def clear(self) -> None:
        """Forget every kept value."""
        with self._lock:
            self._done.clear()
