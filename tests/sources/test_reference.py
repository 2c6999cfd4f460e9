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
        prof = _index.profile(conn, ns_id, task)
        return compute_reference(conn, ns_id, prof, task, mode="lexical", query_vector=None, vindex=None)


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


def test_every_mode_scores_with_the_namespaces_reference(store: MemoryStore) -> None:
    """Lexical mode too carries the reference: its gate and the pool a memory's band is read from."""
    with store.db.read() as conn:
        ref = store.scorer(conn, TASK, namespace=NS, mode="lexical").reference
    assert ref == reference(store, NS)
    assert ref.pool == tuple(sorted(ref.pool, reverse=True))
    assert 0.0 < ref.qpp <= 1.0


def test_an_empty_namespace_serves_nothing(store: MemoryStore) -> None:
    """A namespace never written to has no reference: its gate is closed and every score is 0."""
    with store.db.read() as conn:
        scorer = store.scorer(conn, TASK, namespace=Namespace(tenant_id="nobody"), mode="lexical")
    assert scorer.reference == Reference()
    assert scorer.abstains
    assert scorer.score(_analysis.terms(NOTES[0])) == 0.0


def test_a_task_the_namespace_knows_opens_the_gate_wider_than_a_foreign_one(store: MemoryStore) -> None:
    """The gate is query-level: the namespace's own topic passes it, a topic it never saw does not."""
    own = reference(store, NS).qpp
    foreign = reference(store, NS, "which submarine cable links Lisbon to Recife").qpp
    assert own > foreign


def test_the_best_memory_has_the_whole_band_and_the_gate_as_score(store: MemoryStore) -> None:
    """Score = qpp x band: the namespace's best memory stands at band 1, so its score is the gate."""
    with store.db.read() as conn:
        scorer = store.scorer(conn, TASK, namespace=NS, mode="lexical")
    rels = [scorer.relevance(_analysis.terms(t)) for t in NOTES]
    best = max(rels, key=lambda r: r.base)
    assert best.band == pytest.approx(1.0)
    assert best.score == pytest.approx(scorer.qpp)
    assert all(r.score == pytest.approx(r.qpp * r.band) for r in rels)
    assert all(r.band <= best.band for r in rels)


def test_another_tenant_never_moves_the_reference(store: MemoryStore) -> None:
    """Writes in another namespace leave this namespace's reference and scores unchanged."""
    before = reference(store, NS)
    store.add_entry("Caroline joined the pottery class when did she join", namespace=OTHER)
    assert reference(store, NS) == before
