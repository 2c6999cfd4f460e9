"""Tests of the namespace's reference: its best evidence for a query, over every corpus."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import pytest
from gc_kit import tracked_reachable
from hypothesis import given
from hypothesis import strategies as st

from broker import Namespace
from broker.testing import background_memories
from sources import MemoryStore, NewEntry, NewFact
from sources._abstraction import FactWriter
from sources.relevance import _relevance
from sources.relevance._reference import (
    REFERENCE_DEPTH,
    SHARED_DEPTH,
    Indexes,
    _lexical_pool,
    compute_reference,
)
from sources.relevance._relevance import Reference, lexical_features
from sources.relevance._scorer import Scorer
from sources.storage import _analysis, _engine
from sources.storage._runs import LexicalHit, LexicalRun
from sources.storage._sqlite import _schema

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
        ns_id = conn.namespace_id(ns)
        assert ns_id is not None
        prof = _relevance.profile(conn, ns_id, task)
        return compute_reference(conn, ns_id, Scorer.build(prof, task, mode="lexical", embedder=None))


def brute_force_best(store: MemoryStore, ns: Namespace, texts: list[str]) -> tuple[float, float]:
    with store.db.read() as conn:
        prof = _relevance.profile(conn, conn.namespace_id(ns), TASK)
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


def test_the_shared_retrieval_holds_each_corpus_best_matches(store: MemoryStore) -> None:
    """The turn's one lexical retrieval holds, per corpus, what a search of that corpus alone finds."""
    FactWriter(store).add_fact("Caroline's pottery class meets on Tuesdays.", namespace=NS, id="f")
    ref = reference(store, NS)
    with store.db.read() as conn:
        ns_id = conn.namespace_id(NS)
        assert ns_id is not None
        qterms = sorted(_relevance.profile(conn, ns_id, TASK).present)
        for corpus in (_engine.CORPUS_ENTRIES, _engine.CORPUS_FACTS, _engine.CORPUS_KNOWLEDGE):
            alone = [
                h.rowid for h in conn.lexical_candidates(ns_id, qterms, corpus=corpus, limit=SHARED_DEPTH)
            ]
            shared = ref.hits(corpus, SHARED_DEPTH)
            assert shared is not None
            assert shared.rowids.tolist() == alone
    assert ref.hits(_engine.CORPUS_FACTS, 1) is not None


def _run(n: int) -> LexicalRun:
    return LexicalRun.pack([LexicalHit(rowid=i + 1, rank=-10.0 + i, terms=("t",)) for i in range(n)])


def test_a_source_asking_deeper_than_the_shared_retrieval_searches_itself_unless_it_had_all() -> None:
    """A run as deep as the retrieval went may hold more matches beyond it (None: the source
    searches); a shorter run holds every match, so any depth is served from it."""
    full, short = _run(SHARED_DEPTH), _run(3)
    ref = Reference(lexical_hits=(full, short), depth=REFERENCE_DEPTH, lexical_depth=SHARED_DEPTH)
    assert ref.hits(0, SHARED_DEPTH) == full
    assert ref.hits(0, SHARED_DEPTH + 1) is None
    assert ref.hits(1, SHARED_DEPTH + 1) == short
    assert ref.hits(0, 10) == full.head(10)
    assert ref.hits(2, 10) is None  # a corpus the retrieval did not read


def test_a_kept_reference_holds_its_matches_in_a_few_objects(store: MemoryStore) -> None:
    """A store keeps recent references across turns: their matches are arrays, not an object
    a match (which every full garbage collection would walk), from the engine or the index."""
    store.add_entries([NewEntry(text=f"Caroline's pottery class note {i}") for i in range(200)], namespace=NS)
    store.warm()
    with store.db.read() as conn:
        ns_id = conn.namespace_id(NS)
        assert ns_id is not None
        scorer = Scorer.build(_relevance.profile(conn, ns_id, TASK), TASK, mode="lexical", embedder=None)
        for texts in (None, store.texts):
            ref = compute_reference(conn, ns_id, scorer, Indexes(texts=texts))
            hits = ref.hits(_engine.CORPUS_ENTRIES, REFERENCE_DEPTH)
            assert hits is not None
            assert len(hits) == REFERENCE_DEPTH
            assert tracked_reachable(ref.lexical_hits) < 5 * len(ref.lexical_hits) + 5


def test_shared_matches_carry_the_indexed_terms_of_their_text(store: MemoryStore) -> None:
    """A shared match is scored on its indexed body: the same terms as analysing its text."""
    run = reference(store, NS).hits(_engine.CORPUS_ENTRIES, REFERENCE_DEPTH)
    assert run
    with store.db.read() as conn:
        texts = dict(conn.execute("SELECT rowid, text FROM entries").fetchall())
    assert all(list(h.terms) == _analysis.terms(texts[h.rowid]) for h in run.hits())


def test_the_pool_is_read_from_the_best_matches_of_all_corpora(store: MemoryStore) -> None:
    """The pool's members are the namespace's best REFERENCE_DEPTH matches over every corpus at once."""
    # Texts of distinct lengths (no BM25 ties at the cut), spread over two corpora.
    filler = [" ".join(["clay"] * i) for i in range(60)]
    store.add_entries(
        [NewEntry(text=f"Pottery class {f}", id=f"e{i}") for i, f in enumerate(filler[::2])], namespace=NS
    )
    facts = [NewFact(text=f"Caroline joined {f}", id=f"f{i}") for i, f in enumerate(filler[1::2])]
    FactWriter(store).add_facts(facts, namespace=NS)
    ref = reference(store, NS)
    with store.db.read() as conn:
        ns_id = conn.namespace_id(NS)
        table = _schema.fts_table(ns_id or 0)
        match = _analysis.fts_query(tuple(sorted(_relevance.profile(conn, ns_id, TASK).present)))
        best = conn.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?",
            (match, REFERENCE_DEPTH),
        ).fetchall()
    assert len(best) == REFERENCE_DEPTH  # more matches than the depth: the pool is a choice
    assert set(_lexical_pool(ref.lexical_hits)) == {_schema.split_fts_rowid(int(r[0])) for r in best}


def _recalled(store: MemoryStore) -> list[tuple[str, float]]:
    return [(r.memory.id, r.score) for r in store.recall(TASK, namespace=NS, min_score=0.0)]


def test_a_write_from_another_handle_is_seen_by_the_next_recall(store: MemoryStore, tmp_path: Path) -> None:
    """The profile and reference are cached per write generation: a delete and a replace made
    through another handle (another process) change the next recall of this one, which then
    equals a fresh handle's."""
    assert _recalled(store)[0][0] == "n0"
    assert _recalled(store) == _recalled(store)  # from the caches
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as other:
        assert other.delete("n0", namespace=NS)
        other.add_entry("Nothing about that here.", namespace=NS, id="n1", replace=True)
    again = _recalled(store)
    assert not {"n0", "n1"} & {i for i, _ in again}
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as fresh:
        assert again == _recalled(fresh)


RANKS = st.sampled_from([-3.0, -2.0, -2.0, -1.0, -0.0, 0.0, -1e-300])


@given(
    st.lists(
        st.lists(st.tuples(RANKS, st.lists(st.sampled_from("abcde"), max_size=4)), max_size=40), max_size=4
    )
)
def test_the_pool_takes_the_best_ranks_of_all_corpora_ties_in_corpus_order(
    corpora: list[list[tuple[float, list[str]]]],
) -> None:
    """The pool is the first REFERENCE_DEPTH matches of every corpus sorted by rank alone, equal
    ranks in corpus and match order (Python's stable sort of the matches, the definition)."""
    rowids = itertools.count(1)
    hits = [[LexicalHit(next(rowids), rank, tuple(terms)) for rank, terms in docs] for docs in corpora]
    ranked = sorted(((h.rank, c, h) for c, ch in enumerate(hits) for h in ch), key=lambda item: item[0])
    expected = {(c, h.rowid): tuple(h.terms) for _, c, h in ranked[:REFERENCE_DEPTH]}
    pool = _lexical_pool(tuple(LexicalRun.pack(ch) for ch in hits))
    assert [(k, tuple(v)) for k, v in pool.items()] == list(expected.items())
