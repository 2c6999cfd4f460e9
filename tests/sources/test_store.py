"""The memory store: namespaces, types, migrations, calibrated lexical recall, bad input.

Every test that takes `store` or `make_store` runs on both engines (`store_kit.ENGINES`); the
tests of SQLite's files (FTS5 integrity, a file that is not a database, a directory at the
path, a missing file, the schema-1 migration) are SQLite-only by nature: they open a path.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_kit import StoreOpener, text_index_ok

from broker import RECALL_MIN_SCORE, BrokerClosedError, Namespace, ValidationError
from broker.testing import background_memories
from sources import (
    MemoryStore,
    NeuronWriter,
    NewEntry,
    StoreError,
    Writers,
    _entry_recall,
    ensure_memory_type_column,
)

A = Namespace(tenant_id="acme", project_id="p1")
B = Namespace(tenant_id="globex", project_id="p1")
_EXAMPLES = itertools.count()


@pytest.fixture
def store(make_store: StoreOpener) -> MemoryStore:
    """An empty lexical store on the engine under test."""
    return make_store(mode="lexical")


FILLER = (
    "Standup moved to ten because of the dentist appointment",
    "The staging database was upgraded to Postgres sixteen",
    "Priya prefers short pull requests with screenshots",
    "Our office plants need watering every Friday",
    "The team offsite will be in Lisbon in spring",
    "Invoices are sent on the first business day of the month",
    "Marco is allergic to peanuts, order lunch accordingly",
    "The mobile app release train leaves every second Tuesday",
)


def fill(store: MemoryStore, ns: Namespace) -> None:
    """Background memories of varied topics (ours, plus the bundled sample notes), so
    per-namespace term statistics look like a real store's."""
    store.add_entries([NewEntry(text=t) for t in (*FILLER, *background_memories())], namespace=ns)


def _fts_ok(store: MemoryStore) -> None:
    """The text index is consistent (`store_kit.text_index_ok`)."""
    assert text_index_ok(store)


def _fts_integrity_check(store: MemoryStore) -> None:
    """FTS5's own integrity-check passes on every FTS table of the file (SQLite only)."""
    conn = sqlite3.connect(store.db.path)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE name GLOB 'fts_[0-9]*' AND name NOT LIKE '%vocab%' AND type='table' AND sql LIKE '%fts5(%'"
            )
        ]
        for t in tables:
            conn.execute(f"INSERT INTO {t}({t}) VALUES ('integrity-check')")
    finally:
        conn.close()


def test_recall_finds_relevant_memory_with_calibrated_score(store: MemoryStore) -> None:
    """A memory sharing the query's rare terms is recalled with a probability in [floor, 1]."""
    fill(store, A)
    store.add_entry("Dana fixed the flaky payment webhook retry bug", namespace=A, id="m1")
    store.add_entry("Lunch was pasta today", namespace=A, id="m2")
    hits = store.recall("who fixed the payment webhook retry bug?", namespace=A)
    assert hits[0].memory.id == "m1"
    assert "m2" not in [h.memory.id for h in hits]
    assert RECALL_MIN_SCORE <= hits[0].score <= 1.0


def test_caller_supplied_id_is_kept_and_duplicate_is_an_error(store: MemoryStore) -> None:
    """Ids are unique within a namespace; writing an existing id fails unless replace is asked."""
    assert store.add_entry("first text here", namespace=A, id="x") == "x"
    with pytest.raises(ValidationError) as err:
        store.add_entry("second text here", namespace=A, id="x")
    assert err.value.errors[0].code == "exists"
    store.add_entry("replacement text", namespace=A, id="x", replace=True)
    got = store.get("x", namespace=A)
    assert got is not None
    assert got.text == "replacement text"
    assert store.add_entry("same id other tenant", namespace=B, id="x") == "x"


def test_get_many_reads_what_get_reads_for_each_id_it_holds(store: MemoryStore) -> None:
    """`get_many` gives each held id's memory as `get` does, in one read; absent ids and another
    namespace's are left out."""
    for i in range(3):
        store.add_entry(f"note number {i} about the forklift", namespace=A, id=f"n{i}")
    store.add_entry("another tenant's note", namespace=B, id="b0")
    got = store.get_many(["n2", "n0", "missing", "b0", "n0"], namespace=A)
    assert got == {i: store.get(i, namespace=A) for i in ("n2", "n0")}
    assert store.get_many([], namespace=A) == {}
    assert store.get_many(["n0"], namespace=Namespace(tenant_id="nobody")) == {}


def test_delete_removes_from_every_index(store: MemoryStore) -> None:
    """After delete, the memory is neither gettable nor recallable, and FTS stays consistent."""
    fill(store, A)
    store.add_entry("the forklift certification renewal moved to thursday", namespace=A, id="r")
    assert store.recall("forklift certification renewal", namespace=A)
    assert store.delete("r", namespace=A) is True
    assert store.get("r", namespace=A) is None
    assert store.recall("forklift certification renewal", namespace=A) == []
    assert store.delete("r", namespace=A) is False
    _fts_ok(store)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["w", "d", "r"]),
            st.integers(0, 5),
            st.sampled_from(["alpha beta", "gamma delta epsilon", "alpha zeta"]),
        ),
        max_size=25,
    )
)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fts_integrity_holds_after_any_writes_and_deletes(
    tmp_path: Path, ops: list[tuple[str, int, str]]
) -> None:
    """Any sequence of writes, replaces and deletes leaves FTS5's integrity-check passing
    (SQLite-only: FTS5's own check)."""
    db = tmp_path / f"h{abs(hash(tuple(ops)))}.db"
    with MemoryStore.open(db, mode="lexical") as s:
        for op, i, text in ops:
            if op == "w" and s.get(str(i), namespace=A) is None:
                s.add_entry(text, namespace=A, id=str(i))
            elif op == "r":
                s.add_entry(text + " again", namespace=A, id=str(i), replace=True)
            else:
                s.delete(str(i), namespace=A)
        _fts_integrity_check(s)


def test_typed_query_includes_unclassified_and_excludes_other_types(store: MemoryStore) -> None:
    """Typed recall filters (memory_type IN types) OR memory_type IS NULL."""
    store.add_entry("espresso machine descaling schedule", namespace=A, id="proc", memory_type="procedural")
    store.add_entry("espresso machine descaling schedule notes", namespace=A, id="none")
    store.add_entry(
        "espresso machine descaling schedule memory", namespace=A, id="epi", memory_type="episodic"
    )
    ids = {
        h.memory.id
        for h in store.recall(
            "espresso machine descaling schedule", namespace=A, types=["procedural"], min_score=0.0
        )
    }
    assert ids == {"proc", "none"}


def test_unknown_types_and_bad_limits_are_rejected(store: MemoryStore) -> None:
    """Typed queries name real types; limit is bounded."""
    with pytest.raises(ValidationError) as err:
        store.recall("x y", namespace=A, types=["bogus"], limit=0)
    assert {e.field for e in err.value.errors} == {"types", "limit"}


@pytest.mark.parametrize(
    "query",
    [
        "pardon?",
        "what's 2 + 2",
        '"unbalanced',
        "a:b c:d",
        "NEAR(a b)",
        "AND OR NOT",
        "*",
        "^x",
        "(((",
        "col:term",
    ],
)
def test_query_text_is_never_fts_syntax(store: MemoryStore, query: str) -> None:
    """Quotes, colons, NEAR( and operators in a query are plain text, never an FTS5 error."""
    store.add_entry("a note about near misses and colons", namespace=A)
    assert isinstance(store.recall(query, namespace=A, min_score=0.0), list)


def test_namespaces_never_leak(store: MemoryStore) -> None:
    """The same id and text in two tenants never cross."""
    fill(store, A)
    fill(store, B)
    store.add_entry("secret launch codename bluebird", namespace=A, id="s")
    store.add_entry("secret launch codename bluebird", namespace=B, id="s")
    a = store.recall("launch codename bluebird", namespace=A)
    assert a[0].memory.id == "s"
    assert all(h.memory.namespace == A for h in a)
    assert (
        store.recall("launch codename bluebird", namespace=Namespace(tenant_id="acme", project_id="p2")) == []
    )


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["t1", "t2", "t3"]),
            st.sampled_from(
                ["kiwi mango", "mango papaya guava", "kiwi", "papaya smoothie recipe", "guava jam"]
            ),
        ),
        min_size=1,
        max_size=20,
    )
)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_reads_stay_in_tenant_and_scores_ignore_other_tenants(
    make_store: StoreOpener, writes: list[tuple[str, str]]
) -> None:
    """Random writes across tenants: reads return only their tenant's rows, and a tenant's
    scores do not change when another tenant writes (per-namespace term statistics)."""
    # One database for every example (a fresh PostgreSQL database per example would cost
    # seconds); each example writes to namespaces of its own project, so it starts empty.
    project = f"x{next(_EXAMPLES)}"
    with make_store(mode="lexical") as s:
        home = Namespace(tenant_id="home", project_id=project)
        s.add_entries(
            [NewEntry(text="kiwi mango smoothie", id="h1"), NewEntry(text="guava jam on toast", id="h2")],
            namespace=home,
        )
        before = {
            q: [(h.memory.id, h.score) for h in s.recall(q, namespace=home, min_score=0.0)]
            for q in ("kiwi smoothie", "guava jam", "papaya")
        }
        for tenant, text in writes:
            s.add_entry(text, namespace=Namespace(tenant_id=tenant, project_id=project))
        for q, expected in before.items():
            assert [(h.memory.id, h.score) for h in s.recall(q, namespace=home, min_score=0.0)] == expected
        for tenant in ("t1", "t2", "t3"):
            ns = Namespace(tenant_id=tenant, project_id=project)
            assert all(
                h.memory.namespace == ns
                for h in s.recall("kiwi mango papaya guava", namespace=ns, min_score=0.0)
            )


@pytest.mark.parametrize(
    ("kwargs", "field", "code"),
    [
        ({"text": ""}, "text", "empty"),
        ({"text": "   \n"}, "text", "empty"),
        ({"text": "x" * 40_000}, "text", "too_long"),
        ({"text": "nul\x00byte"}, "text", "nul"),
        ({"text": "lone \ud800 surrogate"}, "text", "encoding"),
        ({"text": "ok text", "memory_type": "dream"}, "memory_type", "invalid_choice"),
        ({"text": "ok text", "kind": "blob"}, "kind", "invalid_choice"),
        ({"text": "ok text", "metadata": {"x": {1, 2}}}, "metadata", "not_json"),
        ({"text": "ok text", "metadata": ["not", "object"]}, "metadata", "type"),
        ({"text": "ok text", "created_at": "yesterday"}, "created_at", "invalid_timestamp"),
        ({"text": "ok text", "importance": 7}, "importance", "out_of_range"),
    ],
)
def test_bad_input_is_a_typed_error_and_writes_nothing(
    store: MemoryStore, kwargs: dict[str, object], field: str, code: str
) -> None:
    """Bad input raises ValidationError naming the field, and nothing is written."""
    kwargs = dict(kwargs)  # the parameter's dict is shared by both engines' runs
    text = kwargs.pop("text")
    with pytest.raises(ValidationError) as err:
        store.add_entry(text, namespace=A, **kwargs)  # type: ignore[arg-type]
    assert (err.value.errors[0].field, err.value.errors[0].code) == (field, code)
    assert store.stats(namespace=A)["entries"] == 0


def test_batch_with_one_bad_entry_writes_nothing(store: MemoryStore) -> None:
    """add_entries is all or nothing, and reports every bad entry at once."""
    with pytest.raises(ValidationError) as err:
        store.add_entries(
            [
                NewEntry(text="good one"),
                NewEntry(text=""),
                NewEntry(text="x", memory_type="nope"),
                NewEntry(text="y", importance=7.0, created_at="nope", metadata=[1]),  # type: ignore[arg-type]
            ],
            namespace=A,
        )
    assert {e.field for e in err.value.errors} == {
        "[1].text",
        "[2].memory_type",
        "[3].importance",
        "[3].created_at",
        "[3].metadata",
    }
    assert store.stats(namespace=A)["entries"] == 0


def test_a_batch_with_nothing_new_writes_nothing_and_creates_no_namespace(store: MemoryStore) -> None:
    """Empty batches, and a batch whose texts are all stored already, open no write."""
    fresh = Namespace(tenant_id="initech", project_id="empty")
    assert store.add_entries([], namespace=fresh) == []
    assert NeuronWriter(store).add_neurons([], namespace=fresh) == []
    assert Writers.for_store(store).facts.add_facts([], namespace=fresh) == []
    with store.engine.read() as conn:
        assert conn.namespace_id(fresh) is None
    ids = store.add_entries([NewEntry(text="Deploys freeze on Fridays.")], namespace=A)
    before = store.stats(namespace=A)
    assert store.add_entries([NewEntry(text="Deploys freeze on Fridays.")], namespace=A) == ids
    assert store.stats(namespace=A) == before


def test_a_batch_of_the_wrong_shape_is_a_validation_error_and_every_clash_is_named(
    store: MemoryStore,
) -> None:
    """A wrong namespace, one entry alone, an item of another type: ValidationError, nothing
    written; ids already stored are all reported at once, each by name."""
    bad = [
        ({"entries": NewEntry(text="alone"), "namespace": A}, {("batch", "type")}),
        ({"entries": [NewEntry(text="ok"), {"text": "a dict"}], "namespace": A}, {("[1]", "type")}),
        ({"entries": [NewEntry(text="ok")], "namespace": ("acme", "p1")}, {("namespace", "type")}),
    ]
    for kwargs, codes in bad:
        with pytest.raises(ValidationError) as err:
            store.add_entries(**kwargs)  # type: ignore[arg-type]
        assert {(e.field, e.code) for e in err.value.errors} == codes
    assert store.stats(namespace=A)["entries"] == 0
    store.add_entries([NewEntry(text="a", id="a"), NewEntry(text="b", id="b")], namespace=A)
    with pytest.raises(ValidationError) as err:
        store.add_entries(
            [NewEntry(text="c", id="c"), NewEntry(text="a2", id="a"), NewEntry(text="b2", id="b")],
            namespace=A,
        )
    assert [(e.code, e.message.split("'")[1]) for e in err.value.errors] == [("exists", "a"), ("exists", "b")]
    assert store.stats(namespace=A)["entries"] == 2


def test_not_a_database_is_a_clear_store_error(tmp_path: Path) -> None:
    """A file that is not SQLite gives StoreError, not a sqlite3 traceback."""
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a usable SQLite database"):
        MemoryStore.open(bad, mode="lexical")


def test_directory_path_is_a_store_error(tmp_path: Path) -> None:
    """A directory at the db path is reported clearly."""
    with pytest.raises(StoreError, match="directory"):
        MemoryStore.open(tmp_path, mode="lexical")


def test_missing_database_reads_as_empty(tmp_path: Path) -> None:
    """Reading a database that does not exist yet behaves as empty."""
    with MemoryStore.open(tmp_path / "new" / "fresh.db", mode="lexical") as s:
        assert s.recall("anything at all", namespace=A) == []
        assert s.get("x", namespace=A) is None


def test_closed_store_raises(make_store: StoreOpener) -> None:
    """Using a closed store is a typed error."""
    s = make_store(mode="lexical")
    s.close()
    with pytest.raises(BrokerClosedError):
        s.recall("x y", namespace=A)


def _old_database(path: Path) -> None:
    """A database as made before memory_type existed (schema version 1)."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE namespaces (ns_id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT NOT NULL,
            n_docs INTEGER NOT NULL DEFAULT 0, total_len INTEGER NOT NULL DEFAULT 0, UNIQUE (tenant_id, project_id));
        CREATE TABLE entries (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL, ns_id INTEGER NOT NULL, tenant_id TEXT NOT NULL,
            project_id TEXT NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL, created_at TEXT NOT NULL,
            importance REAL NOT NULL, metadata TEXT NOT NULL DEFAULT '{}', UNIQUE (ns_id, id));
        INSERT INTO namespaces VALUES (1, 'acme', 'p1', 0, 0);
        INSERT INTO entries (id, ns_id, tenant_id, project_id, kind, text, created_at, importance)
            VALUES ('n1', 1, 'acme', 'p1', 'neuron', 'old neuron', '2024-01-01T00:00:00+00:00', 0.9),
                   ('t1', 1, 'acme', 'p1', 'note', 'old note', '2024-01-01T00:00:00+00:00', 0.5);
        PRAGMA user_version = 1;
        """
    )
    conn.close()


def test_migration_adds_memory_type_and_backfills_neurons_once(tmp_path: Path) -> None:
    """The additive migration works on an old file, classifies neurons once, leaves notes NULL,
    and connecting again does not re-run the backfill."""
    db = tmp_path / "old.db"
    _old_database(db)
    MemoryStore.open(db, mode="lexical").close()
    conn = sqlite3.connect(db)
    rows = dict(conn.execute("SELECT id, memory_type FROM entries").fetchall())
    assert rows == {"n1": "associative", "t1": None}
    conn.execute("UPDATE entries SET memory_type = NULL WHERE id = 'n1'")
    conn.commit()
    conn.close()
    MemoryStore.open(db, mode="lexical").close()  # connect again: no backfill on connect
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT memory_type FROM entries WHERE id = 'n1'").fetchone()[0] is None
    conn.close()


def test_ensure_memory_type_column_is_idempotent_and_self_healing(tmp_path: Path) -> None:
    """It re-classifies unclassified neurons only and never touches explicit classifications."""
    db = tmp_path / "old.db"
    _old_database(db)
    MemoryStore.open(db, mode="lexical").close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE entries SET memory_type = NULL WHERE id = 'n1'")
    conn.execute(
        "INSERT INTO entries (id, ns_id, tenant_id, project_id, kind, text, created_at, importance, memory_type) VALUES ('n2', 1, 'acme', 'p1', 'neuron', 'typed neuron', 'x', 0.1, 'self')"
    )
    assert ensure_memory_type_column(conn) == 1
    assert ensure_memory_type_column(conn) == 0
    rows = dict(conn.execute("SELECT id, memory_type FROM entries").fetchall())
    assert rows == {"n1": "associative", "n2": "self", "t1": None}
    conn.close()


def test_trivial_tasks_recall_nothing_from_a_whole_conversation(
    make_store: StoreOpener, trivial_tasks: list[str], locomo_path: Path
) -> None:
    """Stop words and punctuation never make a memory relevant: every trivial task abstains."""
    conv = json.loads(locomo_path.read_text(encoding="utf-8"))[0]["conversation"]
    entries = [
        NewEntry(id=t["dia_id"], text=f"{t['speaker']}: {t['text']}", memory_type="episodic")
        for key, turns in conv.items()
        if key.startswith("session_") and isinstance(turns, list)
        for t in turns
    ]
    with make_store(mode="lexical") as s:
        s.add_entries(entries, namespace=A)
        recalled = {t: [h.memory.id for h in s.recall(t, namespace=A)] for t in trivial_tasks}
    assert {t: ids for t, ids in recalled.items() if ids} == {}


def test_a_query_profile_is_shared_until_the_namespace_changes(store: MemoryStore) -> None:
    """Sources of a turn share one profile of the task; any write to the namespace renews it."""
    ns = Namespace(tenant_id="profiles")
    store.add_entry("Caroline joined a pottery class in May.", namespace=ns)
    task = "when did Caroline join the pottery class"
    with store.db.read() as conn:
        ns_id = conn.namespace_id(ns)
        first, again = store.profile_on(conn, ns_id, task), store.profile_on(conn, ns_id, task)
    assert again is first
    store.add_entry("The pottery class moved to Tuesdays.", namespace=ns)
    with store.db.read() as conn:
        renewed = store.profile_on(conn, ns_id, task)
    assert renewed is not first
    assert renewed.n_docs == first.n_docs + 1
    assert renewed.generation > first.generation


def test_an_unknown_recall_option_is_a_type_error(store: MemoryStore) -> None:
    """A misspelt recall option fails as a misspelt keyword would, never silently ignored."""
    store.add_entry("The pottery class meets on Tuesdays.", namespace=Namespace(tenant_id="t"))
    with pytest.raises(TypeError, match="limt"):
        store.recall("pottery", namespace=Namespace(tenant_id="t"), limt=3)  # type: ignore[call-arg]


def test_a_closed_gate_recalls_nothing_without_scoring_a_candidate(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below the floor's gate recall returns nothing and reads no candidate; lowering the floor reads them."""
    fill(store, A)
    store.add_entry("The standup notes mention the dentist", namespace=A, id="m1")
    calls: list[int] = []
    scored = _entry_recall.EntryRecall.scored
    monkeypatch.setattr(
        _entry_recall.EntryRecall, "scored", lambda self, *a: calls.append(1) or scored(self, *a)
    )
    query = "standup dentist"
    with store.db.read() as conn:
        qpp = store.scorer_on(conn, conn.namespace_id(A), query, mode="lexical").qpp
    assert 0.0 < qpp < 1.0
    assert store.recall(query, namespace=A, min_score=min(1.0, qpp + 1e-9)) == []
    assert calls == []
    assert store.recall(query, namespace=A, min_score=0.0)
    assert calls == [1]


def test_a_lexical_recall_reads_the_rows_of_only_the_memories_that_clear_the_floor(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Candidates are scored on their indexed terms first: a row under the floor is never read."""
    fill(store, A)
    store.add_entry("Dana fixed the flaky payment webhook retry bug", namespace=A, id="m1")
    for i, text in enumerate(
        ("The webhook docs are on the wiki", "A retry budget was agreed", "Payment day")
    ):
        store.add_entry(text, namespace=A, id=f"weak{i}")
    read: list[int] = []
    rows_by_rowid = _entry_recall.rows_by_rowid
    monkeypatch.setattr(
        _entry_recall,
        "rows_by_rowid",
        lambda conn, ns_id, rowids: read.extend(rowids) or rows_by_rowid(conn, ns_id, rowids),
    )
    query = "who fixed the payment webhook retry bug?"
    hits = store.recall(query, namespace=A, limit=50)
    assert [h.memory.id for h in hits][:1] == ["m1"]
    assert len(read) == len(hits)
    read.clear()
    everything = store.recall(query, namespace=A, limit=50, min_score=0.0)
    assert len(read) == len(everything) > len(hits)


def test_a_kept_lexical_retrieval_is_read_again_after_a_write(store: MemoryStore) -> None:
    """The lexical retrieval kept for a query (`lexical_on`, which a hybrid turn fills while it embeds) is not served after a write to its namespace: the new match is in it."""
    store.add_entry("the deploy checklist lives in the wiki", namespace=A)
    with store.engine.read() as conn:
        ns_id = conn.namespace_id(A)
        assert ns_id is not None
        first = store.lexical_on(conn, ns_id, "deploy checklist")
        assert store.lexical_on(conn, ns_id, "deploy checklist") is first
    store.add_entry("the deploy checklist needs a rollback step", namespace=A)
    with store.engine.read() as conn:
        again = store.lexical_on(conn, ns_id, "deploy checklist")
    assert (len(first[0]), len(again[0])) == (1, 2)


def test_warm_reads_each_namespace_in_a_snapshot_of_its_own_and_opens_graphs_outside_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`warm` reads each namespace in a read of its own and opens the HNSW graphs with no read open: no snapshot stays pinned for the whole warm."""
    from sources.embedding._embedder import load_default_embedder  # noqa: PLC0415
    from sources.storage import _text_index, _vectors  # noqa: PLC0415 - the steps observed

    reads: list[int] = []  # the serial of each read still open
    serials = itertools.count(1)
    warmed: list[tuple[int, int]] = []  # (read serial, namespace)
    graphs: list[int] = []  # reads open at each graph opening
    with MemoryStore.open(tmp_path / "w.db", embedder=load_default_embedder()) as store:
        for tenant in ("a", "b"):
            store.add_entries(
                [NewEntry(text=f"The {tenant} team ships on Fridays.")], namespace=Namespace(tenant_id=tenant)
            )
        real_read, real_warm = type(store.engine).read, _text_index.TextIndex.warm
        real_graph = _vectors.VectorIndex.open_graph

        @contextlib.contextmanager
        def tracked(self: object) -> Iterator[object]:
            reads.append(next(serials))
            try:
                with real_read(self) as conn:  # type: ignore[arg-type]
                    yield conn
            finally:
                reads.pop()

        def text_warm(self: _text_index.TextIndex, conn: object, ns_id: int) -> None:
            warmed.append((reads[-1], ns_id))
            real_warm(self, conn, ns_id)  # type: ignore[arg-type]

        def graph(self: _vectors.VectorIndex, ns_id: int) -> None:
            graphs.append(len(reads))
            real_graph(self, ns_id)

        monkeypatch.setattr(type(store.engine), "read", tracked)
        monkeypatch.setattr(_text_index.TextIndex, "warm", text_warm)
        monkeypatch.setattr(_vectors.VectorIndex, "open_graph", graph)
        store.warm()
    assert sorted(ns for _, ns in warmed) == [1, 2]
    assert len({serial for serial, _ in warmed}) == 2, warmed  # one read each
    assert graphs, "no graph was opened"
    assert set(graphs) == {0}, graphs


def test_stats_counts_the_records_beside_the_entries_by_namespace(store: MemoryStore) -> None:
    """`stats` counts facts, knowledge, graph nodes and edges of each namespace, one namespace's
    never another's, and leaves out a kind it holds none of."""
    writers = Writers.for_store(store)
    other = B
    writers.facts.add_fact("The canary runs for ten minutes.", namespace=A)
    writers.facts.add_fact("Deploys freeze on Fridays.", namespace=A)
    writers.facts.add_fact("Lunch is at noon.", namespace=other)
    writers.knowledge.add_knowledge("Deploys are careful.", namespace=A, provenance=["e1"])
    writers.graphs.add_node("Payments", namespace=A, id="payments")
    writers.graphs.add_node("Canary", namespace=A, id="canary")
    writers.graphs.add_edge("payments", "deploys through", "canary", namespace=A)
    counts = {r["kind"]: r["count"] for r in store.stats(namespace=A)["records"]}
    assert counts == {"fact": 2, "knowledge": 1, "graph node": 2, "graph edge": 1}
    assert store.stats(namespace=other)["records"] == [
        {"tenant": "globex", "project": "p1", "kind": "fact", "count": 1}
    ]
    every = store.stats(namespace=None)["records"]
    assert sum(r["count"] for r in every) == 7
