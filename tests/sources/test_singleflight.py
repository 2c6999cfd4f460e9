"""Tests of the single-flight cache the sources of a turn share (task embeddings, references)."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from sources._singleflight import SingleFlight, interruptible
from sources.relevance._relevance import Reference


def test_concurrent_askers_compute_once() -> None:
    """Many threads asking for one key at once run one computation and all get its result."""
    cache, calls, gate = SingleFlight[tuple[str], Reference](size=8), [], threading.Event()

    def compute() -> Reference:
        calls.append(1)
        gate.wait(timeout=5)
        return Reference(best_bm25=0.5)

    got: list[Reference] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(("k",), compute))) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(timeout=5)
    assert len(calls) == 1
    assert got == [Reference(best_bm25=0.5)] * 8


def test_a_failed_computation_is_not_cached() -> None:
    """A computation that raises (an interrupted read) leaves the next caller to compute afresh."""
    cache = SingleFlight[tuple[str], Reference](size=8)

    def fail() -> Reference:
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        cache.get(("k",), fail)
    assert cache.get(("k",), lambda: Reference(best_bm25=0.25)) == Reference(best_bm25=0.25)


def test_expired_references_are_recomputed() -> None:
    """Past its TTL a reference is computed again."""
    cache = SingleFlight[tuple[str], Reference](size=8, ttl=0.0)
    cache.get(("k",), lambda: Reference(best_bm25=0.1))
    assert cache.get(("k",), lambda: Reference(best_bm25=0.2)) == Reference(best_bm25=0.2)


def test_waiters_take_over_when_the_computing_thread_fails() -> None:
    """A thread waiting on another's computation computes itself when that one fails (an interrupted read)."""
    cache, started, release = (
        SingleFlight[tuple[str], Reference](size=8),
        threading.Event(),
        threading.Event(),
    )
    errors: list[BaseException] = []

    def failing() -> Reference:
        started.set()
        release.wait(timeout=5)
        raise RuntimeError("interrupted")

    def owner() -> None:
        try:
            cache.get(("k",), failing)
        except RuntimeError as exc:
            errors.append(exc)

    first = threading.Thread(target=owner)
    first.start()
    started.wait(timeout=5)
    got: list[Reference] = []
    waiter = threading.Thread(target=lambda: got.append(cache.get(("k",), lambda: Reference(best_bm25=0.7))))
    waiter.start()
    release.set()
    first.join(timeout=5)
    waiter.join(timeout=5)
    assert len(errors) == 1
    assert got == [Reference(best_bm25=0.7)]


def test_an_interrupted_waiter_gives_up_while_the_computation_runs() -> None:
    """A thread whose read is interrupted stops waiting for another's computation at once."""
    cache, started, release, interrupted = (
        SingleFlight[tuple[str], Reference](size=8),
        threading.Event(),
        threading.Event(),
        threading.Event(),
    )

    def slow() -> Reference:
        started.set()
        release.wait(timeout=5)
        return Reference(best_bm25=0.3)

    owner = threading.Thread(target=lambda: cache.get(("k",), slow))
    owner.start()
    started.wait(timeout=5)
    outcome: list[str] = []

    def waiter() -> None:
        with interruptible(interrupted.is_set):
            try:
                cache.get(("k",), slow)
                outcome.append("returned")
            except sqlite3.OperationalError:
                outcome.append("interrupted")

    thread = threading.Thread(target=waiter)
    thread.start()
    interrupted.set()
    thread.join(timeout=5)
    assert outcome == ["interrupted"]
    assert not release.is_set()  # the owner was still computing
    release.set()
    owner.join(timeout=5)
    assert cache.get(("k",), slow) == Reference(best_bm25=0.3)


def test_oldest_values_are_evicted_beyond_the_size() -> None:
    """Past `size` values the least recently used one is computed again."""
    cache: SingleFlight[str, int] = SingleFlight(size=2)
    calls: list[str] = []

    def compute(key: str) -> int:
        calls.append(key)
        return len(calls)

    for key in ("a", "b", "a", "c", "a", "b"):
        cache.get(key, lambda key=key: compute(key))
    assert calls == ["a", "b", "c", "b"]
