"""`PostgresEngine` on a real server: the same statistics, candidates, ranks and scores as
SQLite for the same memories; writes with their audit in one transaction; deletes that reach
every index; reads cut at the deadline; the tenant wall behind the namespace filters."""

from __future__ import annotations

import random
import threading
import time
from typing import TYPE_CHECKING

import numpy as np
import pytest
from pg_server import require

from broker import ConfigError, Namespace
from sources.relevance import _relevance
from sources.relevance._relevance import QueryProfile, lexical_features, lexical_probability
from sources.storage import _analysis
from sources.storage._engine import CORPUS_ENTRIES, ReadStop, Slot, TermStats
from sources.storage._engine_corpora import AuditRecord, StateRecord
from sources.storage._entries import EntryRow
from sources.storage._postgres import StatementCancelledError
from sources.storage._postgres._engine import PostgresEngine
from sources.storage._postgres._schema import APP_ROLE

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

require("psycopg")

ALICE = Namespace(tenant_id="alice")
BOB = Namespace(tenant_id="bob")
WORDS = [
    "train",
    "Lyon",
    "delayed",
    "forty",
    "minutes",
    "tomatoes",
    "basil",
    "balcony",
    "piano",
    "scales",
    "dentist",
    "Thursday",
    "lighthouse",
    "keeper",
    "novel",
    "documentary",
    "creatures",
    "kitchen",
    "cabinet",
    "hinge",
    "groceries",
    "coffee",
    "rice",
    "beans",
    "café",
    "naïve",
    "résumé",
    "Zürich",
    "2026",
    "v2",
    "deployment",
    "database",
    "migration",
    "postgres",
    "sqlite",
    "index",
]
QUERIES = (
    "When was the train to Lyon delayed?",
    "coffee and beans",
    "the café in Zürich",
    "piano piano scales",
    "database migration to postgres 2026",
    "nothing here matches xylophone",
    "thanks!",
)


def corpus(n: int = 240, seed: int = 7) -> list[str]:
    """Deterministic memories of varied length, with repeated terms, stop words and accents."""
    rng = random.Random(seed)  # noqa: S311 - deterministic test data, not secrets
    return [
        " ".join(
            rng.choice(WORDS) if rng.random() < 0.7 else rng.choice(("the", "a", "and", "of"))
            for _ in range(rng.randint(3, 30))
        )
        for _ in range(n)
    ]


Hit = tuple[str, float, tuple[str, ...]]
"""A candidate as both engines are compared on: entry id, BM25 rank, indexed terms."""


def note(i: int, text: str, kind: str = "note") -> EntryRow:
    return EntryRow(
        id=f"m{i}",
        kind=kind,
        memory_type=None,
        text=text,
        created_at="2026-01-01",
        importance=0.5,
        metadata="{}",
    )


@pytest.fixture
def engine(pg_url: str) -> Iterator[PostgresEngine]:
    """A PostgresEngine on a fresh database."""
    eng = PostgresEngine.open(pg_url, connections=2)
    yield eng
    eng.close()


def fill(engine: PostgresEngine, texts: list[str], namespace: Namespace = ALICE) -> int:
    """Write and index the texts as notes m0, m1, ... through the protocol; the ns_id."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(namespace)
        for i, text in enumerate(texts):
            rowid = w.entries.insert(ns_id, namespace, note(i, text))
            w.index_document(ns_id, (CORPUS_ENTRIES, rowid), _analysis.terms(text))
    return ns_id


def sqlite_side(tmp_path: Path, texts: list[str], query: str) -> tuple[TermStats, QueryProfile, list[Hit]]:
    """SQLite's statistics, its query profile (what its scorer reads) and its candidates
    (entry id, FTS5 bm25, terms) for the same notes: through `SqliteEngine` where the tree
    has it, else through `MemoryStore` and its FTS5 index directly."""
    qterms = _analysis.query_terms(query)
    try:
        from sources.storage._sqlite import SqliteEngine  # noqa: PLC0415 - present once the engine is merged
    except ImportError:
        return _sqlite_store_side(tmp_path, texts, query)
    engine = SqliteEngine.open(tmp_path / "m.db")
    try:
        ns_id = fill(engine, texts)  # type: ignore[arg-type]
        with engine.read() as r:
            stats = r.term_stats(ns_id, qterms)
            hits = r.lexical_candidates(ns_id, qterms, corpus=CORPUS_ENTRIES, limit=50)
            ids = {e.rowid: e.id for e in r.entries.rows(ns_id, [h.rowid for h in hits])}
    finally:
        engine.close()
    profile = QueryProfile.build(qterms, n_docs=stats.n_docs, total_len=stats.total_len, df=stats.df)
    return stats, profile, [(ids[h.rowid], h.rank, h.terms) for h in hits]


def _sqlite_store_side(
    tmp_path: Path, texts: list[str], query: str
) -> tuple[TermStats, QueryProfile, list[Hit]]:
    """`sqlite_side` on a tree without the engine protocol's SQLite engine."""
    from sources import MemoryStore, NewEntry, _schema  # noqa: PLC0415 - SQLite's own path
    from sources.storage import _index  # noqa: PLC0415 - SQLite's own path

    qterms = _analysis.query_terms(query)
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        store.add_entries([NewEntry(text=t, id=f"m{i}") for i, t in enumerate(texts)], namespace=ALICE)
        with store.db.read() as conn:
            ns_id = _index.find_ns(conn, ALICE)  # type: ignore[attr-defined]
            profile = _relevance.profile(conn, ns_id, query)  # type: ignore[attr-defined]
            hits = _index.search_hits(conn, ns_id, qterms, corpus=CORPUS_ENTRIES, limit=50)  # type: ignore[attr-defined]
            ids = dict(conn.execute("SELECT rowid, id FROM entries").fetchall())
            n_docs, total_len = conn.execute("SELECT n_docs, total_len FROM namespaces").fetchone()
            vocab = conn.execute(f"SELECT term, doc FROM {_schema.vocab_table(ns_id)}").fetchall()
    df = {t: d for t, d in vocab if t in qterms}
    stats = TermStats(n_docs=n_docs, total_len=total_len, df=df)
    return stats, profile, [(ids[h.rowid], h.rank, h.terms) for h in hits]


def scores(profile: QueryProfile, hits: list[Hit]) -> dict[str, float]:
    """The calibrated lexical score of each hit."""
    return {i: lexical_probability(lexical_features(profile, terms)) for i, _, terms in hits}


@pytest.mark.parametrize("query", QUERIES)
def test_statistics_candidates_ranks_and_scores_equal_sqlite(
    engine: PostgresEngine, tmp_path: Path, query: str
) -> None:
    """The same memories and task give the same candidates, in the same order, with the
    same BM25 rank and the same score on PostgreSQL as on SQLite (to 1e-6)."""
    texts = corpus()
    ns_id = fill(engine, texts)
    qterms = _analysis.query_terms(query)
    with engine.read() as r:
        stats = r.term_stats(ns_id, qterms)
        hits = r.lexical_candidates(ns_id, qterms, corpus=CORPUS_ENTRIES, limit=50)
        ids = {e.rowid: e.id for e in r.entries.rows(ns_id, [h.rowid for h in hits])}
    pg = [(ids[h.rowid], h.rank, h.terms) for h in hits]
    lite_stats, lite_profile, lite = sqlite_side(tmp_path, texts, query)
    assert (stats.n_docs, stats.total_len) == (lite_stats.n_docs, lite_stats.total_len)
    assert stats.df == lite_stats.df
    assert [i for i, _, _ in pg] == [i for i, _, _ in lite]
    assert [t for _, _, t in pg] == [t for _, _, t in lite]
    assert [r for _, r, _ in pg] == pytest.approx([r for _, r, _ in lite], rel=1e-9, abs=1e-12)
    profile = QueryProfile.build(qterms, n_docs=stats.n_docs, total_len=stats.total_len, df=stats.df)
    pg_scores, lite_scores = scores(profile, pg), scores(lite_profile, lite)
    assert pg_scores.keys() == lite_scores.keys()
    for key, value in pg_scores.items():
        assert value == pytest.approx(lite_scores[key], abs=1e-6)
    if qterms and query != QUERIES[-2]:
        assert pg  # the comparison compared something


def test_entries_lexical_filters_types_before_the_limit(engine: PostgresEngine) -> None:
    """A typed lexical read keeps unclassified entries and the asked types, then cuts."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(ALICE)
        for i, mtype in enumerate(("episodic", "semantic", None)):
            row = EntryRow(
                id=f"t{i}",
                kind="note",
                memory_type=mtype,
                text="coffee beans",
                created_at="2026",
                importance=0.5,
                metadata="{}",
            )
            rowid = w.entries.insert(ns_id, ALICE, row)
            w.index_document(ns_id, (CORPUS_ENTRIES, rowid), _analysis.terms(row.text))
    with engine.read() as r:
        found = r.entries.lexical(ns_id, ["coffe"], types=["semantic"], limit=5)
    assert sorted(e.id for e in found) == ["t1", "t2"]


def test_statistics_follow_index_and_unindex_exactly(engine: PostgresEngine) -> None:
    """Unindexing a document undoes its indexing: the statistics are as before it."""
    ns_id = fill(engine, corpus(20))
    terms = sorted({t for text in corpus(20) for t in _analysis.terms(text)})
    with engine.read() as r:
        before = r.term_stats(ns_id, terms)
    with engine.write() as w:
        rowid = w.entries.insert(ns_id, ALICE, note(99, "coffee coffee Zürich piano"))
        w.index_document(ns_id, (CORPUS_ENTRIES, rowid), _analysis.terms("coffee coffee Zürich piano"))
    with engine.read() as r:
        during = r.term_stats(ns_id, terms)
    with engine.write() as w:
        w.entries.delete(ns_id, rowid)
    with engine.read() as r:
        after = r.term_stats(ns_id, terms)
    assert during.n_docs == before.n_docs + 1
    assert during.total_len == before.total_len + 4
    assert (after.n_docs, after.total_len, after.df) == (before.n_docs, before.total_len, before.df)
    assert after.generation > during.generation > before.generation


def _memorule(w: object, ns_id: int, *, fail: bool = False) -> None:
    rowid = w.entries.insert(ns_id, ALICE, note(1, "use tabs", kind="memorule"))  # type: ignore[attr-defined]
    w.index_document(ns_id, (CORPUS_ENTRIES, rowid), _analysis.terms("use tabs"))  # type: ignore[attr-defined]
    state = StateRecord(
        "rule", "indent", "use tabs", '{"scope": "global"}', None, "high", "s1", "dev", "2026"
    )
    w.memorules.append_state(rowid, state)  # type: ignore[attr-defined]
    if fail:
        raise RuntimeError("crash between the state and its audit event")
    w.memorules.append_audit(AuditRecord("m1", "create", "s1", "dev", None, "2026", "alice", "default"))  # type: ignore[attr-defined]


def test_a_memorule_and_its_audit_event_commit_together(engine: PostgresEngine) -> None:
    """A write failing between a memorule's state and its audit event leaves neither; a
    write that completes leaves both."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(ALICE)
    with pytest.raises(RuntimeError), engine.write() as w:
        _memorule(w, ns_id, fail=True)
    with engine.read() as r:
        assert (r.memorules.current(ns_id, "m1"), r.memorules.audit(since=None, tenant_id=None)) == (None, [])
    with engine.write() as w:
        _memorule(w, ns_id)
    with engine.read() as r:
        current = r.memorules.current(ns_id, "m1")
        assert current is not None
        assert (current.versions, current.body) == (1, "use tabs")
        assert [a.action for a in r.memorules.audit(since=None, tenant_id="alice")] == ["create"]
        assert [c.id for c in r.memorules.lexical(ns_id, ["tab"], limit=5, tenant_wide=True)] == ["m1"]


def test_a_delete_reaches_every_index_and_side_table(engine: PostgresEngine) -> None:
    """Deleting an entry removes its index terms, vector (leaving a tombstone), triggers and
    memorule states; its audit events stay."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(ALICE)
        _memorule(w, ns_id)
        rowid = w.entries.find(ns_id, "m1")[0]
        w.neurons.add_triggers(ns_id, rowid, ["tab"])
        w.store_vectors(Slot(ns_id, CORPUS_ENTRIES), [rowid], np.ones((1, 384), np.float32), "model")
    with engine.write() as w:
        w.entries.delete(ns_id, rowid)
    with engine.read() as r:
        assert r.indexed_terms(ns_id, [(CORPUS_ENTRIES, rowid)]) == {}
        assert r.vector_rows(Slot(ns_id, CORPUS_ENTRIES), 0) == []
        assert [t.vector_id for t in r.vector_tombstones(Slot(ns_id, CORPUS_ENTRIES), 0)] == [1]
        assert r.neurons.triggers(ns_id, [rowid]) == []
        assert r.memorules.history(ns_id, "m1") == []
        assert len(r.memorules.audit(since=None, tenant_id="alice")) == 1


def test_vectors_round_trip_and_a_replaced_one_gets_a_new_id(engine: PostgresEngine) -> None:
    """Stored vectors read back bit for bit; replacing one tombstones the old id."""
    ns_id = fill(engine, ["coffee"])
    slot = Slot(ns_id, CORPUS_ENTRIES)
    vec = np.random.default_rng(1).standard_normal((1, 384)).astype(np.float32)
    with engine.write() as w:
        w.store_vectors(slot, [1], vec, "model")
        w.store_vectors(slot, [1], vec * 2, "model")
    with engine.read() as r:
        rows = r.vector_rows(slot, 0)
        stored = r.stored_vectors(slot, [1], "model", 384)
        tombs = r.vector_tombstones(slot, 0)
    assert [(v.vector_id, v.rowid) for v in rows] == [(2, 1)]
    assert np.frombuffer(rows[0].vec, dtype="<f4").tolist() == (vec[0] * 2).tolist()
    assert stored[1].tolist() == (vec[0] * 2).tolist()
    assert [t.vector_id for t in tombs] == [1]


def test_a_namespaces_reads_never_show_another_tenants_rows(engine: PostgresEngine) -> None:
    """Behind every statement scoped to a namespace, even a query lacking its namespace
    filter reads only that namespace's tenant."""
    alice = fill(engine, ["coffee in Lyon"], ALICE)
    fill(engine, ["coffee in Zürich", "more coffee"], BOB)
    with engine.read() as r:
        unfiltered = r.scope.ns(alice).rows("SELECT tenant_id FROM entries")
        assert r.kind_counts(None) != []  # upkeep still sees every tenant, by name
    assert unfiltered == [("alice",)]


def test_a_tripped_stop_cancels_the_running_read(engine: PostgresEngine) -> None:
    """A stop tripped from another thread cancels the statement on the server at once."""
    stop = ReadStop()
    threading.Timer(0.2, stop.trip).start()
    started = time.monotonic()
    with pytest.raises(Exception), engine.read(stop) as r:  # noqa: B017 - any error: the caller's cancellation wins
        r.scope.execute("SELECT pg_sleep(20)")
    assert time.monotonic() - started < 3
    with engine.read() as r:  # the connection came back clean
        assert r.namespace_ids() == ()


def test_a_stop_tripped_before_the_read_fails_its_first_statement(engine: PostgresEngine) -> None:
    """A read whose stop already tripped runs nothing."""
    stop = ReadStop()
    stop.trip()
    with pytest.raises(StatementCancelledError, match="not run"), engine.read(stop) as r:
        r.namespace_ids()


def test_nearest_through_hnsw_finds_the_exact_neighbours_of_its_namespace(engine: PostgresEngine) -> None:
    """The HNSW search of pgvector, filtered to one namespace among others, returns that
    namespace's rows only and recalls at least 90% of the exact top 10 (cosine)."""
    rng = np.random.default_rng(3)
    slots = []
    for ns in (ALICE, BOB):
        vecs = rng.standard_normal((400, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        with engine.write() as w:
            ns_id = w.ensure_namespace(ns)
            w.store_vectors(
                Slot(ns_id, CORPUS_ENTRIES), list(range(ns_id * 1000, ns_id * 1000 + 400)), vecs, "m"
            )
        slots.append((Slot(ns_id, CORPUS_ENTRIES), vecs))
    slot, vecs = slots[0]
    recalled = 0
    with engine.read() as r:
        for q in vecs[:20] + 0.3 * rng.standard_normal((20, 384)).astype(np.float32):
            exact = {slot.ns_id * 1000 + int(i) for i in np.argsort(-(vecs @ q))[:10]}
            found = r.nearest(slot, q, 10, model_id="m")
            assert len(found) == 10
            assert all(slot.ns_id * 1000 <= rowid < slot.ns_id * 1000 + 400 for rowid, _ in found)
            recalled += len(exact & {rowid for rowid, _ in found})
    assert recalled / 200 >= 0.9


def test_the_statement_timeout_stops_a_runaway_read(pg_url: str) -> None:
    """With a statement timeout, a statement past it is cancelled by the server itself."""
    eng = PostgresEngine.open(pg_url, statement_timeout=0.3)
    try:
        with pytest.raises(StatementCancelledError, match="statement timeout"), eng.read() as r:
            r.scope.execute("SELECT pg_sleep(10)")
    finally:
        eng.close()


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_a_timeout_that_is_not_positive_is_a_config_error(pg_url: str, timeout: float) -> None:
    """A zero or negative statement timeout is refused before connecting."""
    with pytest.raises(ConfigError):
        PostgresEngine.open(pg_url, statement_timeout=timeout)


def test_vectors_of_any_dimension_are_stored_and_searched(engine: PostgresEngine) -> None:
    """An embedder of another dimension than the index's works: stored, read, searched exactly."""
    ns_id = fill(engine, ["coffee", "tea", "water"])
    slot = Slot(ns_id, CORPUS_ENTRIES)
    vecs = np.eye(3, 8, dtype=np.float32)
    with engine.write() as w:
        w.store_vectors(slot, [1, 2, 3], vecs, "small")
    with engine.read() as r:
        assert r.stored_vectors(slot, [2], "small", 8)[2].tolist() == vecs[1].tolist()
        assert r.nearest(slot, vecs[2], 2, model_id="small")[0][0] == 3


def test_the_hnsw_index_serves_the_default_dimension(engine: PostgresEngine) -> None:
    """A nearest-neighbour query of the indexed dimension can be planned on the HNSW index
    (its expression and predicate match the index's; a table this small would be scanned)."""
    ns_id = fill(engine, ["coffee"])
    with engine.read() as r:
        r.scope.ns(ns_id).execute("SET LOCAL enable_seqscan = off")
        r.scope.execute("SET LOCAL enable_sort = off")
        plan = r.scope.rows(
            "EXPLAIN SELECT src_rowid FROM vectors WHERE vector_dims(vec) = 384 "
            "ORDER BY (vec::vector(384)) <=> %s LIMIT 5",
            (np.ones(384, np.float32),),
        )
    assert "vectors_hnsw" in "\n".join(str(row[0]) for row in plan)


def test_the_text_log_records_every_index_change_in_commit_order(engine: PostgresEngine) -> None:
    """Indexing and unindexing append changes an in-memory index catches up from; the
    documents are read back in chunks with their terms."""
    with engine.read() as r:
        assert r.text_log_bounds() == (1, 0)
    ns_id = fill(engine, ["coffee beans", "train to Lyon", "piano"])
    with engine.read() as r:
        first, last = r.text_log_bounds()
        docs = [d for part in r.indexed_documents(ns_id, chunk=2) for d in part]
    with engine.write() as w:
        w.unindex_document(ns_id, (CORPUS_ENTRIES, 2))
        w.unindex_document(ns_id, (CORPUS_ENTRIES, 2))  # not indexed any more: no change
    bob = fill(engine, ["tea"], BOB)
    with engine.read() as r:
        changes = r.text_changes(ns_id, last)
        assert [c.rowid for c in r.text_changes(bob, 0)] == [4]  # each namespace reads its own
    assert (first, last) == (1, 3)
    assert sorted(docs) == [((0, 1), "coffe bean"), ((0, 2), "train lyon"), ((0, 3), "piano")]
    assert [(c.corpus, c.rowid, c.op) for c in changes] == [(0, 2, -1)]
    assert changes[0].change_id > last


def test_typed_filters_rowids_by_memory_type_and_changes_come_in_pages(engine: PostgresEngine) -> None:
    """`typed` keeps the asked types and unclassified entries, `memory_types` tells each one's;
    `text_changes` honours its limit;
    the change stamp is unknown (callers read the generations)."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(ALICE)
        rowids = []
        for i, mtype in enumerate(("episodic", "semantic", None)):
            row = EntryRow(
                id=f"t{i}",
                kind="note",
                memory_type=mtype,
                text="tea",
                created_at="2026",
                importance=0.5,
                metadata="{}",
            )
            rowids.append(w.entries.insert(ns_id, ALICE, row))
            w.index_document(ns_id, (CORPUS_ENTRIES, rowids[-1]), ["tea"])
    with engine.read() as r:
        assert r.entries.typed(ns_id, rowids, ["semantic"]) == {rowids[1], rowids[2]}
        assert r.entries.memory_types(ns_id, None) == dict(
            zip(rowids, ("episodic", "semantic", None), strict=True)
        )
        assert r.entries.memory_types(ns_id, [rowids[2], rowids[0], 10**9]) == {
            rowids[2]: None,
            rowids[0]: "episodic",
        }
        assert [c.rowid for c in r.text_changes(ns_id, 0, limit=2)] == rowids[:2]
        assert len(r.text_changes(ns_id, 0)) == 3
    assert engine.change_stamp() is None


def test_its_sources_read_in_as_many_threads_as_the_pool_has_connections(engine: PostgresEngine) -> None:
    """A PostgreSQL store's sources may wait on as many server round trips at once as it has connections."""
    assert engine.read_threads == int(engine.database.limiter.total_tokens) > 1


def test_refreshed_statistics_count_the_loaded_rows_and_the_wall_stays(engine: PostgresEngine) -> None:
    """`refresh_statistics` ANALYZEs as the owner; the next transaction runs as the application role again."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(ALICE)
        for i in range(50):
            w.entries.insert(ns_id, ALICE, note(i, f"tea note {i}"))
    engine.refresh_statistics()
    with engine.database.transaction() as session:
        (tuples,) = session.execute(
            "SELECT c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'context_broker' AND c.relname = 'entries'"
        ).fetchone() or (None,)
        (role,) = session.execute("SELECT current_user").fetchone() or (None,)
    assert tuples == 50
    assert role == APP_ROLE


def test_a_read_is_one_read_only_snapshot_and_a_write_reads_committed(engine: PostgresEngine) -> None:
    """The transaction's kind rides on its BEGIN: a read is REPEATABLE READ and READ ONLY, a write
    READ COMMITTED and writable, whichever ran last on the pooled connection."""
    settings = "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')"
    for _ in range(2):
        with engine.read() as r:
            assert tuple(r.scope.execute(settings).fetchone() or ()) == ("repeatable read", "on")
        with engine.write() as w:
            assert tuple(w.scope.execute(settings).fetchone() or ()) == ("read committed", "off")


def test_a_namespace_created_by_a_rolled_back_write_is_not_remembered(engine: PostgresEngine) -> None:
    """A namespace's id is remembered once committed only: after a rollback it is unknown again,
    and the next write creates it anew."""
    carol = Namespace(tenant_id="carol")

    def abandoned() -> None:
        with engine.write() as w:
            created = w.ensure_namespace(carol)
            assert w.namespace_id(carol) == created
            raise RuntimeError("abandoned")

    with pytest.raises(RuntimeError, match="abandoned"):
        abandoned()
    with engine.read() as r:
        assert r.namespace_id(carol) is None
    with engine.write() as w:
        again = w.ensure_namespace(carol)
    with engine.read() as r:
        assert r.namespace_id(carol) == again


def test_a_read_does_not_see_a_namespace_committed_after_its_snapshot(engine: PostgresEngine) -> None:
    """A namespace another write commits while a read is open stays unknown to that read, even
    once a later transaction has found (and the engine remembered) its id."""
    dave = Namespace(tenant_id="dave")
    with engine.read() as before:
        assert before.namespace_id(ALICE) is None  # the snapshot is taken
        with engine.write() as w:
            w.ensure_namespace(dave)
        with engine.write() as w:
            assert w.namespace_id(dave) is not None
        assert before.namespace_id(dave) is None
