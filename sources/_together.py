"""Blocking calls that release the GIL, run at the same time from one worker thread.

A turn's vector searches go to up to three HNSW graphs of one namespace (entries, facts,
knowledge), independent of each other; usearch releases the GIL while it searches, so on 2
cores two searches take little longer than one (measured, two graphs of 77k and 15k 8-bit
vectors, 1,000 searches each: 0.62 s one after another, 0.36 s on two threads). The read lane's
thread runs the first call itself and hands the others to a few persistent helper threads,
then waits for every one of them: nothing outlives `run_together`.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

T = TypeVar("T")

HELPERS: Final = 2
"""Helper threads of the process (the caller's own thread runs a call too)."""

_lock = threading.Lock()
_pool: tuple[int, concurrent.futures.ThreadPoolExecutor] | None = None  # (pid, pool)


def run_together(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Each call's result, in order: the first on this thread, the others on helper threads,
    at the same time.

    Returns when every call has finished; an exception of any call is re-raised then (the
    first call's before the helpers').
    """
    if len(calls) < 2:
        return [call() for call in calls]
    pool = _helpers()
    futures = [pool.submit(call) for call in calls[1:]]
    try:
        first = calls[0]()
    finally:
        concurrent.futures.wait(futures)
    return [first, *(future.result() for future in futures)]


def _helpers() -> concurrent.futures.ThreadPoolExecutor:
    """The process's helper threads; a forked child starts its own (the parent's threads are
    not in it, and a pool made before the fork would queue calls that nothing runs)."""
    global _pool  # noqa: PLW0603 - one pool a process is the point
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            pool = concurrent.futures.ThreadPoolExecutor(HELPERS, thread_name_prefix="context-broker-helper")
            _pool = (os.getpid(), pool)
        return _pool[1]


__all__ = ["HELPERS", "run_together"]
