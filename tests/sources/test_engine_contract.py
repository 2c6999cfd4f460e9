"""What every storage engine guarantees (`sources.storage._engine`), run on each engine of
`engine_contract.ENGINES`: the project's statistics and ranks, namespaces as walls, one
transaction per write, deletes that reach every index, vectors in commit order, the stop."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pytest
from engine_contract import MODEL, NS, OTHER, add_entry, engine, entry_row, unit

from sources.relevance._turn_context import asks
from sources.storage import _analysis
from sources.storage._engine import ReadStop, Slot, bm25_rank
from sources.storage._engine_corpora import AuditRecord, StateRecord

if TYPE_CHECKING:
    from sources.storage._engine import Engine

__all__ = ["engine"]  # the fixture, parametrised over the engines

TEXTS = (
    "Deploys freeze every Friday after the payment incident.",
    "The payment service deploys through the canary pipeline.",
    "Lunch on Friday is pizza in the big room.",
    "Payment retries back off exponentially; deploys wait for green retries.",
)


def _indexed(e: Engine) -> tuple[int, list[int]]:
    with e.write() as w:
        ns_id = w.ensure_namespace(NS)
        rowids = [add_entry(w, ns_id, NS, f"e{i}", t) for i, t in enumerate(TEXTS)]
    return ns_id, rowids


def test_a_read_never_creates_a_namespace_and_a_write_creates_it_once(engine: Engine) -> None:
    """Reads of an unknown namespace see nothing; `ensure_namespace` gives one stable id."""
    with engine.read() as r:
        assert r.namespace_id(NS) is None
        assert r.versions(NS) == ()
    with engine.write() as w:
        first = w.ensure_namespace(NS)
        assert w.ensure_namespace(NS) == first
    with engine.read() as r:
        assert r.namespace_id(NS) == first
        assert r.namespace_ids() == (first,)


def test_a_read_is_one_snapshot_that_a_commit_during_it_does_not_reach(engine: Engine) -> None:
    """A read sees the store as at its first statement: what another connection commits meanwhile comes only with the next read."""
    with engine.write() as w:
        first = w.ensure_namespace(NS)
    with engine.read() as r:
        assert r.namespace_ids() == (first,)
        with engine.write() as w:
            w.ensure_namespace(OTHER)
        assert r.namespace_ids() == (first,)
        assert r.namespace_id(OTHER) is None
    with engine.read() as r:
        assert len(r.namespace_ids()) == 2


def test_term_statistics_are_the_projects_and_a_removal_undoes_exactly(engine: Engine) -> None:
    """n_docs, total_len and df count the analysed terms of every corpus; unindexing reverts them."""
    ns_id, rowids = _indexed(engine)
    terms = [_analysis.terms(t) for t in TEXTS]
    with engine.write() as w:
        w.index_document(ns_id, (1, 99), _analysis.terms("A fact about payment deploys."))
    with engine.read() as r:
        stats = r.term_stats(ns_id, ["payment", "deploy", "absent"])
    assert stats.n_docs == len(TEXTS) + 1
    assert stats.total_len == sum(map(len, terms)) + len(_analysis.terms("A fact about payment deploys."))
    assert dict(stats.df) == {"payment": 4, "deploy": 4}
    with engine.write() as w:
        w.unindex_document(ns_id, (1, 99))
        w.unindex_document(ns_id, (0, rowids[0]))
    with engine.read() as r:
        after = r.term_stats(ns_id, ["payment"])
    assert (after.n_docs, after.total_len) == (len(TEXTS) - 1, sum(map(len, terms[1:])))
    assert dict(after.df) == {"payment": 2}


def test_lexical_candidates_carry_the_projects_bm25_rank_and_order(engine: Engine) -> None:
    """Rank equals `bm25_rank` on the namespace statistics; order is rank then rowid; terms as indexed."""
    ns_id, rowids = _indexed(engine)
    query = ["deploy", "friday", "payment"]
    with engine.read() as r:
        hits = r.lexical_candidates(ns_id, query, corpus=0, limit=10)
        stats = r.term_stats(ns_id, query)
    by_rowid = dict(zip(rowids, TEXTS, strict=True))
    assert {h.rowid for h in hits} == {rowids[0], rowids[1], rowids[2], rowids[3]}
    for hit in hits:
        assert list(hit.terms) == _analysis.terms(by_rowid[hit.rowid])
        assert math.isclose(hit.rank, bm25_rank(hit.terms, query, stats), rel_tol=1e-9)
    assert [(h.rank, h.rowid) for h in hits] == sorted((h.rank, h.rowid) for h in hits)
    with engine.read() as r:
        assert r.lexical_candidates(ns_id, query, corpus=1, limit=10) == []  # another corpus
        assert [h.rowid for h in r.lexical_candidates(ns_id, query, corpus=0, limit=2)] == [
            h.rowid for h in hits[:2]
        ]


def test_a_term_is_data_never_query_syntax(engine: Engine) -> None:
    """Quotes, operators and stars in a term match nothing rather than fail or widen the match."""
    ns_id, _ = _indexed(engine)
    with engine.read() as r:
        for term in ['pay"ment', "deploy OR lunch", "pay*", "NEAR(a b)"]:
            assert r.lexical_candidates(ns_id, [term], corpus=0, limit=10) == []


def test_namespaces_are_walls(engine: Engine) -> None:
    """Another namespace's documents, statistics and rows are never seen."""
    ns_id, rowids = _indexed(engine)
    with engine.write() as w:
        other = w.ensure_namespace(OTHER)
        add_entry(w, other, OTHER, "x", "Payment payment payment deploys.")
    with engine.read() as r:
        assert r.term_stats(ns_id, ["payment"]).df["payment"] == 3
        assert all(h.rowid in rowids for h in r.lexical_candidates(ns_id, ["payment"], corpus=0, limit=50))
        assert r.entries.rows(other, rowids) == []


def test_a_failed_write_leaves_nothing(engine: Engine) -> None:
    """An error inside `write` rolls back the row, its index terms, its vector and its namespace."""

    def write_then_fail() -> None:
        with engine.write() as w:
            ns_id = w.ensure_namespace(NS)
            rowid = add_entry(w, ns_id, NS, "a", TEXTS[0])
            w.store_vectors(Slot(ns_id, 0), [rowid], unit(1), MODEL)
            raise RuntimeError

    with pytest.raises(RuntimeError):
        write_then_fail()
    with engine.read() as r:
        assert r.namespace_id(NS) is None
        assert r.tombstone_bounds() == (0, 0)


def test_deleting_an_entry_reaches_every_index_and_side_table(engine: Engine) -> None:
    """Index terms, statistics, vector, triggers and memorule states go; audit events stay."""
    ns_id, rowids = _indexed(engine)
    gone = rowids[1]
    state = StateRecord("rule", "s", "b", "{}", None, "asserted", None, None, "2026-01-01T00:00:00+00:00")
    with engine.write() as w:
        w.store_vectors(Slot(ns_id, 0), [gone], unit(2), MODEL)
        w.neurons.add_triggers(ns_id, gone, ["canari"])
        w.memorules.append_state(gone, state)
        w.memorules.append_audit(
            AuditRecord("e1", "create", None, None, None, state.written_at, "acme", "web")
        )
        before = w.generation(ns_id)
        w.entries.delete(ns_id, gone)
    with engine.read() as r:
        assert r.entries.find(ns_id, "e1") is None
        assert r.indexed_terms(ns_id, [(0, gone)]) == {}
        assert r.term_stats(ns_id, ["canari"]).n_docs == len(TEXTS) - 1
        assert r.stored_vectors(Slot(ns_id, 0), [gone], MODEL, 8) == {}
        assert r.neurons.triggers(ns_id, [gone]) == []
        assert len(r.memorules.audit(since=None, tenant_id="acme")) == 1
        assert [t.vector_id for t in r.vector_tombstones(Slot(ns_id, 0), 0)] == [1]
        assert r.generation(ns_id) != before


def test_a_write_sees_its_own_namespace_and_generation_change(engine: Engine) -> None:
    """A write is no snapshot: the namespace it creates and the generation its writes bump are
    read back inside it (a read keeps each as it first read them)."""
    with engine.write() as w:
        assert w.namespace_id(NS) is None
        ns_id = w.ensure_namespace(NS)
        assert w.namespace_id(NS) == ns_id
        before = w.generation(ns_id)
        add_entry(w, ns_id, NS, "e0", TEXTS[0])
        assert w.generation(ns_id) != before


def test_each_read_reads_the_namespace_and_generation_afresh(engine: Engine) -> None:
    """What one read snapshot keeps (`sources.storage._read_once`) is its own: the next read sees the
    namespace a write created meanwhile and the generation it bumped."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(NS)
    with engine.read() as r:
        before = r.generation(ns_id)
        assert r.namespace_id(OTHER) is None
    with engine.write() as w:
        add_entry(w, ns_id, NS, "e0", TEXTS[0])
        other = w.ensure_namespace(OTHER)
    with engine.read() as r:
        assert r.generation(ns_id) != before
        assert r.namespace_id(OTHER) == other


def test_vector_ids_grow_in_commit_order_and_a_replacement_leaves_a_tombstone(engine: Engine) -> None:
    """A reader catching up by `after` sees every new vector and every deletion, none twice."""
    ns_id, rowids = _indexed(engine)
    slot = Slot(ns_id, 0)
    with engine.write() as w:
        w.store_vectors(slot, rowids[:2], unit(3).repeat(2, axis=0), MODEL)
    with engine.read() as r:
        first = r.vector_rows(slot, 0)
    top = max(v.vector_id for v in first)
    with engine.write() as w:
        w.store_vectors(slot, rowids[:1], unit(4), MODEL)  # a replacement
    with engine.read() as r:
        new = r.vector_rows(slot, top)
        tombs = r.vector_tombstones(slot, 0)
        assert r.vector_rows(Slot(ns_id, 1), 0) == []
    assert [v.rowid for v in new] == [rowids[0]]
    assert new[0].vector_id > top
    assert [t.vector_id for t in tombs] == [v.vector_id for v in first if v.rowid == rowids[0]]


def test_a_tripped_stop_fails_the_read_and_the_next_read_works(engine: Engine) -> None:
    """A read whose stop is tripped fails at its first statement; the connection comes back clean."""
    ns_id, _ = _indexed(engine)
    stop = ReadStop()
    stop.trip()
    with pytest.raises(Exception), engine.read(stop) as r:  # noqa: B017 - any error: the caller's cancellation wins
        r.term_stats(ns_id, ["payment"])
    with engine.read(ReadStop()) as r:
        assert r.term_stats(ns_id, ["payment"]).n_docs == len(TEXTS)


def test_every_index_change_is_logged_in_commit_order(engine: Engine) -> None:
    """In-memory indexes catch up from the log: each index and removal once, ids rising."""
    ns_id, rowids = _indexed(engine)
    with engine.write() as w:
        w.unindex_document(ns_id, (0, rowids[0]))
        w.unindex_document(ns_id, (0, 12345))  # not indexed: nothing to log
    with engine.read() as r:
        changes = r.text_changes(ns_id, 0)
        oldest, newest = r.text_log_bounds()
        docs = [doc for chunk in r.indexed_documents(ns_id, chunk=2) for doc in chunk]
    assert [(c.corpus, c.rowid, c.op) for c in changes] == [
        *((0, rowid, 1) for rowid in rowids),
        (0, rowids[0], -1),
    ]
    assert [c.change_id for c in changes] == sorted({c.change_id for c in changes})
    assert (oldest, newest) == (changes[0].change_id, changes[-1].change_id)
    assert sorted(docs) == sorted(
        ((0, rowid), " ".join(_analysis.terms(text)))
        for rowid, text in zip(rowids[1:], TEXTS[1:], strict=True)
    )


def test_memory_types_tell_each_entrys_type_within_its_namespace(engine: Engine) -> None:
    """`memory_types` gives each asked entry's type (None: unclassified), never another namespace's rows."""
    with engine.write() as w:
        ns_id, other = w.ensure_namespace(NS), w.ensure_namespace(OTHER)
        typed = [
            w.entries.insert(ns_id, NS, entry_row(f"e{i}", "tea", memory_type=t))
            for i, t in enumerate(("self", None))
        ]
        foreign = w.entries.insert(other, OTHER, entry_row("x", "tea", memory_type="self"))
    with engine.read() as r:
        assert r.entries.memory_types(ns_id, None) == {typed[0]: "self", typed[1]: None}
        assert r.entries.memory_types(ns_id, [typed[1], foreign]) == {typed[1]: None}


def test_episodic_turns_tell_the_turns_and_which_ask_within_its_namespace(engine: Engine) -> None:
    """`episodic_turns` gives each asked conversation turn (an episodic message, or an episodic
    text opening with its speaker) and whether its text holds a '?'; an episodic note that names
    no speaker, other types, absent rowids and another namespace's rows are left out."""
    with engine.write() as w:
        ns_id, other = w.ensure_namespace(NS), w.ensure_namespace(OTHER)
        rows = [
            w.entries.insert(ns_id, NS, entry_row(f"e{i}", text, kind=kind, memory_type=t))
            for i, (text, kind, t) in enumerate(
                (
                    ("Ana: Where is the offsite? [a photo]", "note", "episodic"),
                    ("In Lisbon.", "message", "episodic"),
                    ("On May 2 the release broke CSV export? No: fixed.", "note", "episodic"),
                    ("Ana: Why?", "note", "semantic"),
                )
            )
        ]
        foreign = w.entries.insert(other, OTHER, entry_row("x", "Bo: Who?", memory_type="episodic"))
    with engine.read() as r:
        assert r.entries.episodic_turns(ns_id, [*rows, foreign, 10**9]) == {rows[0]: True, rows[1]: False}
        assert r.entries.episodic_turns(ns_id, []) == {}
    said = {"Où est-ce ?": True, "¿qué? sí": True, "Full-width\uff1f": False, "No question.": False}
    with engine.write() as w:
        asked = {
            w.entries.insert(
                ns_id, NS, entry_row(f"q{i}", f"Élodie Durand: {text}", memory_type="episodic")
            ): asks(text)
            for i, text in enumerate(said)
        }
    assert list(asked.values()) == list(said.values())
    with engine.read() as r:
        assert r.entries.episodic_turns(ns_id, list(asked)) == asked  # as `_turn_context.asks` reads them


def test_a_batch_write_matches_the_same_writes_one_by_one(engine: Engine) -> None:
    """insert_many / find_many / index_documents: the rowids, statistics, ranks and log of single writes."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(NS)
        rowids = w.entries.insert_many(ns_id, NS, [entry_row(f"e{i}", t) for i, t in enumerate(TEXTS)])
        w.index_documents(ns_id, [((0, r), _analysis.terms(t)) for r, t in zip(rowids, TEXTS, strict=True)])
        w.index_documents(ns_id, [])
        other = w.ensure_namespace(OTHER)
        w.entries.insert_many(other, OTHER, [entry_row("e0", TEXTS[0])])
    with engine.read() as r:
        found = r.entries.find_many(ns_id, ["e3", "e0", "absent"])
        stats = r.term_stats(ns_id, ["payment", "deploy"])
        hits = r.lexical_candidates(ns_id, ["payment", "deploy"], corpus=0, limit=10)
        changes = r.text_changes(ns_id, 0)
    assert len(set(rowids)) == len(TEXTS)
    assert found == {"e0": (rowids[0], "note"), "e3": (rowids[3], "note")}
    assert (stats.n_docs, stats.total_len) == (len(TEXTS), sum(len(_analysis.terms(t)) for t in TEXTS))
    assert dict(stats.df) == {"payment": 3, "deploy": 3}
    assert [(c.corpus, c.rowid, c.op) for c in changes] == [(0, rowid, 1) for rowid in rowids]
    assert {h.rowid for h in hits} == {rowids[0], rowids[1], rowids[3]}
    assert [h.rank for h in hits] == sorted(h.rank for h in hits)


def test_a_batch_indexes_a_document_without_terms_and_repeated_terms(engine: Engine) -> None:
    """index_documents: a document with no term is counted and listed; a repeated term counts
    once in df, added to the df already stored; one batch may span corpora."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(NS)
        first = w.entries.insert(ns_id, NS, entry_row("z", "tea"))
        w.index_documents(ns_id, [((0, first), ["tea"])])
    with engine.write() as w:
        rowids = w.entries.insert_many(ns_id, NS, [entry_row("a", "tea tea tea"), entry_row("b", "of the")])
        batch = [((0, rowids[0]), ["tea", "tea", "tea"]), ((0, rowids[1]), []), ((1, 77), ["tea", "cake"])]
        w.index_documents(ns_id, batch)
    with engine.read() as r:
        stats = r.term_stats(ns_id, ["tea", "cake"])
        docs = sorted(doc for chunk in r.indexed_documents(ns_id, chunk=10) for doc in chunk)
        hits = r.lexical_candidates(ns_id, ["tea"], corpus=0, limit=10)
    assert (stats.n_docs, stats.total_len, dict(stats.df)) == (4, 6, {"tea": 3, "cake": 1})
    assert docs == sorted(
        [((0, first), "tea"), ((0, rowids[0]), "tea tea tea"), ((0, rowids[1]), ""), ((1, 77), "tea cake")]
    )
    assert {h.rowid for h in hits} == {first, rowids[0]}


def test_a_batch_of_documents_gets_each_its_own_rowid(engine: Engine) -> None:
    """docs.insert_many returns each document's rowid in order; find_many sees only its namespace's."""
    rows = [
        {
            "id": f"k{i}",
            "text": t,
            "provenance": "[]",
            "created_at": "2026-01-01T00:00:00+00:00",
            "metadata": "{}",
        }
        for i, t in enumerate(TEXTS[:3])
    ]
    with engine.write() as w:
        ns_id, other = w.ensure_namespace(NS), w.ensure_namespace(OTHER)
        rowids = w.docs.insert_many("knowledge", ns_id, rows)
        assert w.docs.insert_many("knowledge", ns_id, []) == []
    with engine.read() as r:
        assert r.docs.find_many("knowledge", ns_id, ["k2", "k0", "nope"]) == {
            "k0": rowids[0],
            "k2": rowids[2],
        }
        assert r.docs.find_many("knowledge", other, ["k0"]) == {}
        stored = r.docs.rows("knowledge", ns_id, rowids, ["text"])
    assert sorted((rowid, text) for rowid, _, text in stored) == sorted(zip(rowids, TEXTS[:3], strict=True))
