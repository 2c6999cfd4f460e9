"""Tests of the namespace's reference: its best evidence for a query, over every corpus."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from broker import Namespace
from broker.testing import background_memories
from sources import MemoryStore, NewEntry, _analysis, _index
from sources._abstraction import FactWriter
from sources._reference import compute_reference
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
