"""Tests of the in-memory text index: its postings (`sources.storage._postings`) and a store's
indexes kept current from the change log (`sources.storage._text_index`)."""

from __future__ import annotations

import itertools
import sqlite3
from typing import TYPE_CHECKING

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker import Namespace
from sources import MemoryStore, NewEntry
from sources.relevance import _relevance
from sources.relevance._reference import SHARED_DEPTH, lexical_hits
from sources.storage import _analysis, _engine, _postings, _text_index
from sources.storage._postings import Postings
from sources.storage._text_index import TextIndex

if TYPE_CHECKING:
    from pathlib import Path

ACME = Namespace(tenant_id="acme")
WORDS = ("apple", "berry", "cherry", "delta", "echo", "fig", "grape", "hotel", "india", "juliet")
CORPORA = _engine.CORPORA

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True).map(
    lambda words: list(_analysis.query_terms(" ".join(words)))
)


def _fts(
    conn: sqlite3.Connection, ns_id: int, qterms: list[str], depth: int
) -> list[list[tuple[int, float]]]:
    """Each corpus's matches as the FTS query ranks them."""
    return [
        [(h.rowid, h.rank) for h in conn.lexical_candidates(ns_id, qterms, corpus=c, limit=depth)]
        for c in CORPORA
    ]


def _mine(index: TextIndex, conn: sqlite3.Connection, ns_id: int, qterms: list[str], depth: int) -> list:
    found = index.top(conn, ns_id, qterms, depth)
    assert found is not None
    return [[(h.rowid, h.rank) for h in found[c].hits()] for c in CORPORA]


def _same(a: list[list[tuple[int, float]]], b: list[list[tuple[int, float]]]) -> None:
    assert [[r for r, _ in hits] for hits in a] == [[r for r, _ in hits] for hits in b]
    for hits_a, hits_b in zip(a, b, strict=True):
        for (_, x), (_, y) in zip(hits_a, hits_b, strict=True):
            assert x == pytest.approx(y, rel=1e-9, abs=1e-12)


def _same_up_to_float_ties(
    a: list[list[tuple[int, float]]], b: list[list[tuple[int, float]]], full: list[list[tuple[int, float]]]
) -> None:
    """`_same`, except where two ranks are equal but for float rounding: FTS5 sums a document's
    terms in its own order, so two documents of mathematically equal BM25 (the same length and
    terms, their counts swapped) can differ in the last bit and come back in either order. Every
    position holds the same rank, every row of ours is one of FTS5's matches with that rank, no
    row twice, and exact ties of ours are in rowid order."""
    for hits_a, hits_b, all_b in zip(a, b, full, strict=True):
        assert len(hits_a) == len(hits_b)
        ranks = dict(all_b)
        assert len({r for r, _ in hits_a}) == len(hits_a)
        for (row, x), (_, y) in zip(hits_a, hits_b, strict=True):
            assert x == pytest.approx(y, rel=1e-9, abs=1e-12)
            assert row in ranks
            assert ranks[row] == pytest.approx(x, rel=1e-9, abs=1e-12)
        for (row, x), (after, y) in itertools.pairwise(hits_a):
            assert x < y or (x == y and row < after)


def _store_with(path: Path, notes: list[str]) -> MemoryStore:
    store = MemoryStore.open(path, mode="lexical")
    store.add_entries([NewEntry(text=t) for t in notes], namespace=ACME)
    return store


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(notes=st.lists(texts, min_size=1, max_size=40), query=queries, depth=st.integers(1, 8))
def test_matches_and_ranks_are_those_of_the_fts_query(
    tmp_path_factory: pytest.TempPathFactory, notes: list[str], query: list[str], depth: int
) -> None:
    """For any notes and query, each corpus's best matches and their BM25 ranks equal FTS5's (ties by rowid, up to float rounding)."""
    with _store_with(tmp_path_factory.mktemp("p") / "m.db", notes) as store, store.db.read() as conn:
        ns_id = conn.namespace_id(ACME)
        assert ns_id is not None
        index = TextIndex()
        index.warm(conn, ns_id)
        _same_up_to_float_ties(
            _mine(index, conn, ns_id, query, depth),
            _fts(conn, ns_id, query, depth),
            _fts(conn, ns_id, query, len(notes)),
        )


def test_fts5_and_the_index_may_order_float_ties_differently_but_rank_alike(tmp_path: Path) -> None:
    """Hypothesis's counterexample: two notes of equal BM25 but for the last bit of FTS5's sum."""
    notes = [
        "apple apple apple apple apple apple berry berry berry grape grape hotel",
        "apple apple apple apple apple apple berry berry berry grape hotel hotel",
    ]
    query = ["appl", "grape", "berri", "hotel"]
    with _store_with(tmp_path / "m.db", notes) as store, store.db.read() as conn:
        ns_id = conn.namespace_id(ACME)
        assert ns_id is not None
        index = TextIndex()
        index.warm(conn, ns_id)
        _same_up_to_float_ties(
            _mine(index, conn, ns_id, query, 1), _fts(conn, ns_id, query, 1), _fts(conn, ns_id, query, 2)
        )


def test_the_index_catches_up_with_another_connections_writes(tmp_path: Path) -> None:
    """Inserts, deletes and replaces written by another store on the same file are seen at the next search."""
    path = tmp_path / "m.db"
    with _store_with(path, ["apple berry", "cherry delta", "apple fig"]) as store:
        index = TextIndex()
        with store.db.read() as conn:
            ns_id = conn.namespace_id(ACME)
            assert ns_id is not None
            index.warm(conn, ns_id)
        with MemoryStore.open(path, mode="lexical") as other:
            other.add_entry("apple apple grape", namespace=ACME, id="new")
            other.add_entry("cherry only now", namespace=ACME, id="gone")
            other.delete("gone", namespace=ACME)
            other.add_entries([NewEntry(text="fig fig fig", id="new")], namespace=ACME, replace=True)
        with store.db.read() as conn:
            for query in (["appl"], ["fig"], ["cherri", "grape"]):
                _same(_mine(index, conn, ns_id, query, 10), _fts(conn, ns_id, query, 10))
                found = index.top(conn, ns_id, query, 10)
                assert found is not None
                assert [[h.terms for h in run.hits()] for run in found] == [
                    [h.terms for h in conn.lexical_candidates(ns_id, query, corpus=c, limit=10)]
                    for c in CORPORA
                ]
            every = ["appl", "berri", "cherri", "delta", "fig", "grape", "onli", "now", "absent"]
            assert index.document_frequencies(conn, ns_id, every) == conn.term_stats(ns_id, every).df
            keys = [
                (corpus, rowid) for corpus in CORPORA for rowid in range(1, 8)
            ]  # some removed, some never
            assert index.indexed_terms(conn, ns_id, keys) == conn.indexed_terms(ns_id, keys)


def test_an_index_behind_the_kept_log_defers_to_fts_until_warm(tmp_path: Path) -> None:
    """When the log rows it needs were pruned, the index answers None (the FTS query runs) and warm rebuilds it."""
    with _store_with(tmp_path / "m.db", ["apple berry"]) as store:
        index = TextIndex()
        with store.db.read() as conn:
            ns_id = conn.namespace_id(ACME)
            assert ns_id is not None
            index.warm(conn, ns_id)
        store.add_entries([NewEntry(text=f"apple note {i}") for i in range(3)], namespace=ACME)
        with sqlite3.connect(store.db.path) as raw:
            raw.execute("DELETE FROM text_log WHERE id < (SELECT max(id) FROM text_log)")
        with store.db.read() as conn, structlog.testing.capture_logs() as logs:
            assert index.top(conn, ns_id, ["appl"], 10) is None
            assert [e["event"] for e in logs] == ["store.text_index.behind"]
            index.warm(conn, ns_id)
            _same(_mine(index, conn, ns_id, ["appl"], 10), _fts(conn, ns_id, ["appl"], 10))
            assert len(_mine(index, conn, ns_id, ["appl"], 10)[0]) == 4


def test_the_turns_lexical_retrieval_is_the_same_with_or_without_the_index(tmp_path: Path) -> None:
    """The reference's per-corpus hits (rowids, ranks, terms) from a warm index equal the FTS queries'."""
    notes = [f"{a} {b} {c}" for a in WORDS[:4] for b in WORDS[3:7] for c in WORDS[6:]]
    with _store_with(tmp_path / "m.db", notes) as store:
        store.warm()
        with store.db.read() as conn:
            ns_id = conn.namespace_id(ACME)
            assert ns_id is not None
            prof = store.profile_on(conn, ns_id, "apple delta juliet")
            index = TextIndex()
            index.warm(conn, ns_id)
            assert lexical_hits(conn, ns_id, prof, index) == lexical_hits(conn, ns_id, prof)
            matching = [n for n in notes if {"apple", "delta", "juliet"} & set(n.split())]
            assert len(lexical_hits(conn, ns_id, prof, index)[0]) == min(SHARED_DEPTH, len(matching))


def test_removing_and_adding_keep_the_statistics_of_the_live_documents() -> None:
    """After removes and re-adds, N and the total length count only live documents."""
    index = Postings.build([[(4, "apple berry"), (8, "apple")], [(12, "cherry cherry cherry")]], log_id=0)
    index.remove([8, 99])
    index.add([(4, "delta")])
    assert (index.n_live, index.total_len) == (2, 4)
    assert [r for r, _ in index.top(["apple", "delta"], 5)[0]] == [4]
    assert index.top(["apple"], 5) == ((), (), ())


@given(notes=st.lists(texts, min_size=1, max_size=30), cut=st.integers(0, 30), query=queries)
def test_indexing_in_chunks_gives_the_same_postings(notes: list[str], cut: int, query: list[str]) -> None:
    """However the documents are split into chunks, every term's postings and every ranking are the same."""
    rows = [(4 * (i + 1), " ".join(_analysis.terms(t))) for i, t in enumerate(notes)]
    whole = Postings.build([rows], log_id=0)
    chunked = Postings.build([rows[:cut], rows[cut:]], log_id=0)
    assert whole.terms.keys() == chunked.terms.keys()
    for term, (slots, tf) in whole.terms.items():
        assert slots.tolist() == chunked.terms[term][0].tolist()
        assert tf.tolist() == chunked.terms[term][1].tolist()
    assert whole.top(query, 5) == chunked.top(query, 5)


@given(
    notes=st.lists(texts, min_size=1, max_size=20),
    cut=st.integers(0, 20),
    removed=st.sets(st.integers(1, 20)),
    replaced=st.dictionaries(st.integers(1, 25), texts, max_size=6),
)
def test_each_documents_terms_and_each_terms_document_count_follow_removes_and_replaces(
    notes: list[str], cut: int, removed: set[int], replaced: dict[int, str]
) -> None:
    """A live document's indexed terms are its current body's, in order; a term's count is of the live documents holding it."""
    bodies = {4 * (i + 1): " ".join(_analysis.terms(t)) for i, t in enumerate(notes)}
    rows = list(bodies.items())
    index = Postings.build([rows[:cut], rows[cut:]], log_id=0)
    index.remove(4 * i for i in removed)
    index.add([(4 * i, " ".join(_analysis.terms(t))) for i, t in replaced.items()])
    current = {r: b for r, b in bodies.items() if r // 4 not in removed}
    current.update({4 * i: " ".join(_analysis.terms(t)) for i, t in replaced.items()})
    assert {r: index.indexed_terms(r) for r in index.slot_of} == {
        r: tuple(b.split()) for r, b in current.items()
    }
    terms = {t for b in current.values() for t in b.split()}
    assert {t: n for t, n in index.df.items() if n} == {
        t: sum(t in b.split() for b in current.values()) for t in terms
    }


def test_a_bulk_write_is_absorbed_a_batch_a_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More logged changes than a batch: each search applies one batch and defers to FTS until caught up."""
    monkeypatch.setattr(_text_index, "_CATCH_UP", 2)
    with _store_with(tmp_path / "m.db", ["apple berry"]) as store:
        index = TextIndex()
        with store.db.read() as conn:
            ns_id = conn.namespace_id(ACME)
            assert ns_id is not None
            index.warm(conn, ns_id)
        store.add_entries([NewEntry(text=f"apple note {i}") for i in range(5)], namespace=ACME)
        with store.db.read() as conn:
            answers = [index.top(conn, ns_id, ["appl"], 10) for _ in range(4)]
            assert [a is None for a in answers] == [True, True, False, False]
            _same(_mine(index, conn, ns_id, ["appl"], 10), _fts(conn, ns_id, ["appl"], 10))


def test_warm_builds_again_an_index_of_mostly_removed_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once removed documents outnumber live ones, warm rebuilds the index with only the live ones."""
    monkeypatch.setattr(_postings, "_COMPACT_MIN", 2)
    with _store_with(tmp_path / "m.db", ["apple berry"]) as store:
        store.add_entries([NewEntry(text=f"apple note {i}", id=f"n{i}") for i in range(6)], namespace=ACME)
        with store.db.read() as conn:
            ns_id = conn.namespace_id(ACME)
            assert ns_id is not None
            index = TextIndex()
            index.warm(conn, ns_id)
        for i in range(6):
            store.delete(f"n{i}", namespace=ACME)
        with store.db.read() as conn:
            assert index.top(conn, ns_id, ["appl"], 10) is not None
            index.warm(conn, ns_id)
            rebuilt = index._indexes[ns_id]
            assert (len(rebuilt.rowids), rebuilt.n_live) == (1, 1)
            _same(_mine(index, conn, ns_id, ["appl"], 10), _fts(conn, ns_id, ["appl"], 10))


@pytest.mark.parametrize("types", [("self",), ("self", "personality"), ("episodic",)])
def test_a_typed_recall_reads_down_the_ranking_as_the_typed_fts_query_would(
    tmp_path: Path, types: tuple[str, ...]
) -> None:
    """Typed candidates from the warm index (types read down its ranking) are the typed FTS query's."""
    kinds = [None, "self", "personality", "episodic", "semantic"]
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        store.add_entries(
            [
                NewEntry(text=f"{WORDS[i % 7]} {WORDS[(i * 3) % 10]} apple", memory_type=kinds[i % 5])
                for i in range(300)
            ],
            namespace=ACME,
        )
        cold = store.recall("apple cherry delta", namespace=ACME, types=types, min_score=0.0, limit=40)
        store.warm()
        warm = store.recall("apple cherry delta", namespace=ACME, types=types, min_score=0.0, limit=40)
        assert [(r.memory.id, r.score) for r in warm] == [(r.memory.id, r.score) for r in cold]
        assert all(r.memory.memory_type in (*types, None) for r in warm)
        assert len(warm) >= 20  # notes dedupe by text: fewer than 300 were stored


def test_a_typed_recall_reads_deeper_when_the_best_matches_are_of_other_types(tmp_path: Path) -> None:
    """When hundreds of better matches have other types, the warm path reads further down and finds the typed ones."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        better = [NewEntry(text=f"apple apple note {i}", memory_type="semantic") for i in range(400)]
        typed = [NewEntry(text=f"apple remark {i} of mine", memory_type="self") for i in range(10)]
        store.add_entries([*better, *typed], namespace=ACME)
        cold = store.recall("apple", namespace=ACME, types=("self",), min_score=0.0, limit=5)
        store.warm()
        warm = store.recall("apple", namespace=ACME, types=("self",), min_score=0.0, limit=5)
        assert [r.memory.id for r in warm] == [r.memory.id for r in cold]
        assert len(warm) == 5
        assert {r.memory.memory_type for r in warm} == {"self"}


def test_a_query_profile_is_the_same_from_the_index_as_from_the_engines_statistics(tmp_path: Path) -> None:
    """Document frequencies from a current index give the profile the engine's term statistics give."""
    notes = [f"{a} {b}" for a in WORDS[:5] for b in WORDS[4:]]
    with _store_with(tmp_path / "m.db", notes) as store:
        store.delete(store.add_entry("apple kiwi", namespace=ACME), namespace=ACME)
        with store.db.read() as conn:
            ns_id = conn.namespace_id(ACME)
            assert ns_id is not None
            index = TextIndex()
            index.warm(conn, ns_id)
            assert index.document_frequencies(conn, ns_id, ["appl", "kiwi"]) == {"appl": 6}
            for query in ("apple and the hotel", "kiwi juliet berry", "nothing known"):
                assert _relevance.profile(conn, ns_id, query, index) == _relevance.profile(conn, ns_id, query)


def test_entries_typed_after_warm_are_filtered_as_the_typed_fts_query_would(tmp_path: Path) -> None:
    """Typed entries written after the index was built get their types from the log's catch-up, not a guess."""
    kinds = [None, "self", "personality", "episodic"]
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        store.add_entries(
            [NewEntry(text=f"apple note {i}", memory_type="episodic") for i in range(50)], namespace=ACME
        )
        store.warm()
        store.add_entries(
            [NewEntry(text=f"apple {WORDS[i % 10]} later {i}", memory_type=kinds[i % 4]) for i in range(60)],
            namespace=ACME,
        )
        warm = store.recall("apple later", namespace=ACME, types=("self",), min_score=0.0, limit=20)
        with MemoryStore.open(tmp_path / "m.db", mode="lexical") as cold_store:  # no index: the FTS query
            cold = cold_store.recall("apple later", namespace=ACME, types=("self",), min_score=0.0, limit=20)
        assert [(r.memory.id, r.score) for r in warm] == [(r.memory.id, r.score) for r in cold]
        assert {r.memory.memory_type for r in warm} == {"self", None}


@settings(max_examples=40, deadline=None)
@given(
    notes=st.lists(st.tuples(texts, st.sampled_from([None, "self", "episodic"])), min_size=1, max_size=40),
    query=queries,
    depth=st.integers(1, 8),
)
def test_typed_matches_are_the_ranking_filtered_by_type(
    notes: list[tuple[str, str | None]], query: list[str], depth: int
) -> None:
    """An entry-typed top is the whole ranking of entries kept to the allowed or unclassified types, cut to depth."""
    index = Postings.build([[(i * 4, " ".join(_analysis.terms(t))) for i, (t, _) in enumerate(notes)]], 0)
    index.set_types({i: kind for i, (_, kind) in enumerate(notes)})
    everything = index.top(query, len(notes))[0]
    expected = [(r, rank) for r, rank in everything if notes[r // 4][1] in ("self", None)][:depth]
    assert index.top_typed(query, depth, ("self",)) == tuple(expected)


def test_a_typed_top_with_a_match_of_unknown_type_answers_none() -> None:
    """Without every match's type the index does not guess: the caller reads the engine instead."""
    index = Postings.build([[(0, "apple"), (4, "apple berry")]], 0)
    index.set_types({0: "self"})
    assert index.top_typed(["apple"], 5, ("self",)) is None
    index.set_types({1: None})
    assert index.top_typed(["apple"], 5, ("self",)) == index.top(["apple"], 5)[0]


@settings(max_examples=60)
@given(
    st.lists(
        st.lists(st.lists(st.sampled_from(["apple", "berry", "cherry"]), max_size=4), max_size=6), max_size=5
    ),
    st.data(),
)
def test_documents_terms_come_packed_as_their_own_across_segments(
    chunks: list[list[list[str]]], data: st.DataObject
) -> None:
    """Documents of several segments, asked in any order (repeats too), then taken and sliced,
    read as each one's indexed terms; the ids the scoring counts over are theirs, in turn."""
    codes = itertools.count(4, 4)
    index = Postings.build([[(next(codes), " ".join(doc)) for doc in chunk] for chunk in chunks], log_id=0)
    live = sorted(index.slot_of)
    order = data.draw(st.lists(st.sampled_from(live), max_size=12)) if live else []
    packed = index.terms_of(order)
    assert [tuple(d) for d in packed] == [index.indexed_terms(r) for r in order]
    picks = data.draw(st.lists(st.integers(0, len(order) - 1), max_size=8)) if order else []
    n = data.draw(st.integers(0, 9))
    taken = packed.take(picks)[:n]
    wanted = [index.indexed_terms(order[i]) for i in picks][:n]
    assert [tuple(d) for d in taken] == wanted
    form = taken.id_form()
    assert form is not None
    assert form[1].tolist() == [index.word_id[t] for doc in wanted for t in doc]
    assert form[2].tolist() == [len(doc) for doc in wanted]


def test_a_query_asked_again_after_a_write_sees_the_write() -> None:
    """The index keeps its last query's matches only while nothing is added or removed."""
    index = Postings.build([[(0, "apple"), (4, "apple berry")]], 0)
    assert [r for r, _ in index.top(["apple"], 5)[0]] == [0, 4]
    index.add([(8, "apple apple")])
    assert [r for r, _ in index.top(["apple"], 5)[0]] == [8, 0, 4]
    index.remove([0])
    assert [r for r, _ in index.top(["apple"], 5)[0]] == [8, 4]
    index.set_types({1: None, 2: None})
    assert index.top_typed(["apple"], 5, ("self",)) == index.top(["apple"], 5)[0]


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.integers(0, 5), texts), max_size=25), query=queries)
def test_asking_between_writes_answers_as_a_fresh_index_would(
    steps: list[tuple[bool, int, str]], query: list[str]
) -> None:
    """Whatever the writes between two askings of one query, each answer is a just-built index's."""
    index = Postings.build([[(0, "apple")]], 0)
    live = {0: "apple"}
    for adding, slot, text in steps:
        rowid = slot * 4
        if adding:
            live[rowid] = " ".join(_analysis.terms(text))
            index.add([(rowid, live[rowid])])
        else:
            index.remove([rowid])
            live.pop(rowid, None)
        assert index.top(query, 8) == Postings.build([sorted(live.items())], 0).top(query, 8)


@settings(max_examples=60, deadline=None)
@given(notes=st.lists(texts, min_size=1, max_size=40), query=queries)
def test_summing_over_every_slot_and_sorting_the_matches_rank_alike(
    notes: list[str], query: list[str]
) -> None:
    """The two ways a query's BM25 parts are added up give the same matches, ranks and order."""
    body = [(i * 4 + c, " ".join(_analysis.terms(t))) for i, t in enumerate(notes) for c in (0, 1)]
    index = Postings.build([body], 0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_postings, "_DENSE_SUM_RATIO", 0)  # never dense: sorted
        sorted_way = index._score(query)
        patch.setattr(_postings, "_DENSE_SUM_RATIO", 10**9)  # always dense
        dense_way = index._score(query)
    if sorted_way is None or dense_way is None:
        assert sorted_way is dense_way is None
        return
    for a, b in zip(sorted_way, dense_way, strict=True):
        assert a.tolist() == b.tolist()
