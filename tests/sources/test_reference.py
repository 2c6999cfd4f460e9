"""Tests of the namespace's reference (its best evidence for a query) and its shared cache."""

from __future__ import annotations

import sqlite3
import threading
from typing import TYPE_CHECKING

import pytest

from broker import Namespace
from broker.testing import background_memories
from sources import MemoryStore, NewEntry, _analysis, _index
from sources._abstraction import FactWriter
from sources._reference import ReferenceCache, compute_reference, interruptible
from sources._relevance import Reference, lexical_features

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

NS = Namespace(tenant_id="alice")
OTHER = Namespace(tenant_id="bob")
TASK = "when did Caroline join the pottery class"
NOTES = (
    "Caroline joined a pottery class on Tuesdays last spring.",
    "Caroline talked about her cousin's wedding in June.",
    "The pottery shop downtown closed last year.",
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as s:
        s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=NS)
        s.add_entries([NewEntry(text=t, id=f"n{i}") for i, t in enumerate(NOTES)], namespace=NS)
        yield s


def reference(store: MemoryStore, ns: Namespace, task: str = TASK) -> Reference:
    with store.db.read() as conn:
        ns_id = _index.find_ns(conn, ns)
        assert ns_id is not None
        return compute_reference(conn, ns_id, _index.profile(conn, ns_id, task), None, None)


def brute_force_best(store: MemoryStore, ns: Namespace, texts: list[str]) -> tuple[float, float]:
    with store.db.read() as conn:
        prof = _index.profile(conn, _index.find_ns(conn, ns), TASK)
    feats = [lexical_features(prof, _analysis.terms(t)) for t in texts]
    return max(f.bm25_norm for f in feats), max(f.coverage for f in feats)


def test_reference_is_the_namespace_best_lexical_evidence(store: MemoryStore) -> None:
    """The reference equals the best BM25 and coverage over every memory of the namespace."""
    ref = reference(store, NS)
    assert (ref.best_bm25, ref.best_coverage) == pytest.approx(
        brute_force_best(store, NS, [*background_memories(), *NOTES])
    )
    assert ref.best_cosine is None  # lexical: no query vector


def test_reference_spans_every_corpus(store: MemoryStore) -> None:
    """A fact that matches better than every entry raises the reference: facts are in the namespace."""
    before = reference(store, NS)
    FactWriter(store).add_fact("Caroline joined the pottery class when spring began.", namespace=NS, id="f")
    after = reference(store, NS)
    assert after.best_bm25 > before.best_bm25


def test_lexical_scorers_need_no_reference(store: MemoryStore) -> None:
    """Lexical mode scores without relative features, so it computes no reference."""
    with store.db.read() as conn:
        assert store.scorer(conn, TASK, namespace=NS, mode="lexical").reference == Reference()


def test_another_tenant_never_moves_the_reference(store: MemoryStore) -> None:
    """Writes in another namespace leave this namespace's reference and scores unchanged."""
    before = reference(store, NS)
    store.add_entry("Caroline joined the pottery class when did she join", namespace=OTHER)
    assert reference(store, NS) == before


def test_concurrent_askers_compute_once() -> None:
    """Many threads asking for one key at once run one computation and all get its result."""
    cache, calls, gate = ReferenceCache(), [], threading.Event()

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
    cache = ReferenceCache()

    def fail() -> Reference:
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        cache.get(("k",), fail)
    assert cache.get(("k",), lambda: Reference(best_bm25=0.25)) == Reference(best_bm25=0.25)


def test_expired_references_are_recomputed() -> None:
    """Past its TTL a reference is computed again."""
    cache = ReferenceCache(ttl=0.0)
    cache.get(("k",), lambda: Reference(best_bm25=0.1))
    assert cache.get(("k",), lambda: Reference(best_bm25=0.2)) == Reference(best_bm25=0.2)


def test_waiters_take_over_when_the_computing_thread_fails() -> None:
    """A thread waiting on another's computation computes itself when that one fails (an interrupted read)."""
    cache, started, release = ReferenceCache(), threading.Event(), threading.Event()
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
        ReferenceCache(),
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
