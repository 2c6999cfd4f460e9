"""Tenant isolation: no read path returns another namespace's memory, across processes.

Every test runs on both engines (`store_kit.ENGINES`) except the version-3 file's migration,
which is SQLite's own history.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from store_kit import StoreOpener, fresh_databases, sql_rows

from broker import Namespace
from sources import MemoryStore, NewEntry, load_default_embedder
from sources.storage import _analysis, _vectors
from sources.storage._sqlite import _schema

if TYPE_CHECKING:
    from collections.abc import Callable

ACME = Namespace(tenant_id="acme", project_id="web")
BOBCO = Namespace(tenant_id="bobco")
LEAKED = "BOBCO SECRET: payroll export password is hunter2"


def _python(db: str, code: str) -> None:
    """Run `code` in another process, with the store's path or URL as argv[1]."""
    script = "from broker import Namespace\nfrom sources import open_store\n" + textwrap.dedent(code)
    subprocess.run([sys.executable, "-c", script, db], check=True, capture_output=True, timeout=120)


def test_stale_vector_index_across_processes_never_leaks_another_tenant(make_store: StoreOpener) -> None:
    """The issue's recipe: rowids freed by a delete and reused by two other processes leak nothing."""
    db = make_store.target
    notes = [
        "The staging cluster runs on three nodes in Frankfurt.",
        "Code review needs one approval before merging.",
        "The on-call rotation changes every Monday at nine.",
    ]
    last = "The quarterly roadmap review with the design team is on Thursday afternoon."
    with make_store(mode="hybrid") as store:
        store.add_entries([NewEntry(text=t) for t in notes], namespace=ACME)
        store.add_entry(last, id="a-last", namespace=ACME)
        first = store.recall(
            "When is the quarterly roadmap review?", namespace=ACME, mode="dense", min_score=0
        )
        assert "a-last" in [r.memory.id for r in first]  # the index is loaded and holds a-last
        _python(
            db,
            """
            import sys
            with open_store(sys.argv[1], mode="lexical") as s:
                assert s.delete("a-last", namespace=Namespace(tenant_id="acme", project_id="web"))
            """,
        )
        _python(
            db,
            f"""
            import sys
            with open_store(sys.argv[1], mode="lexical") as s:
                s.add_entry({LEAKED!r}, namespace=Namespace(tenant_id="bobco"))
            """,
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "context_broker",
                "--db",
                db,
                "--tenant",
                "acme",
                "--project",
                "web",
                "remember",
                "Lunch menus for the offsite are due on Friday.",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        for mode in ("dense", "hybrid", "lexical"):
            again = store.recall(
                "When is the quarterly roadmap review?", namespace=ACME, mode=mode, min_score=0
            )
            assert all(r.memory.namespace == ACME for r in again), mode
            assert all("BOBCO" not in r.memory.text for r in again), mode
            assert "a-last" not in [r.memory.id for r in again], mode


def test_a_version_3_file_migrates_its_vectors_and_keeps_them_findable(tmp_path: Path) -> None:
    """Schema v4 rebuilds `vectors` with never-reused ids: old vectors keep their ids and stay
    searchable (SQLite-only: a migration of SQLite files)."""
    db = tmp_path / "v3.db"
    old = "Backups of the billing database run nightly at two."
    embedder = load_default_embedder()
    conn = sqlite3.connect(db, isolation_level=None)
    for step in _schema.MIGRATIONS[:3]:
        step(conn)
    conn.execute("PRAGMA user_version = 3")
    conn.execute("INSERT INTO namespaces (ns_id, tenant_id, project_id) VALUES (1, 'acme', 'web')")
    _schema.create_namespace_index(conn, 1)
    conn.execute(
        "INSERT INTO entries (rowid, id, ns_id, tenant_id, project_id, kind, text, created_at, importance) "
        "VALUES (7, 'b', 1, 'acme', 'web', 'note', ?, '2026-01-01T00:00:00+00:00', 0.5)",
        (old,),
    )
    # What a version-3 writer did (no text log yet): the FTS row and the namespace's statistics.
    body = _analysis.index_text(old)
    conn.execute(f"INSERT INTO {_schema.fts_table(1)} (rowid, body) VALUES (?, ?)", (7 * 4, body))
    conn.execute("UPDATE namespaces SET n_docs = 1, total_len = ? WHERE ns_id = 1", (len(body.split()),))
    conn.execute(
        "INSERT INTO vectors (rowid, corpus, src_rowid, ns_id, model_id, vec) VALUES (5, 0, 7, 1, ?, ?)",
        (embedder.model_id, _vectors.to_blob(embedder.embed([old])[0])),
    )
    conn.close()
    with MemoryStore.open(db, mode="hybrid") as store:
        assert _version(db) == _schema.SCHEMA_VERSION
        store.add_entry("The staging cluster runs on three nodes in Frankfurt.", id="s", namespace=ACME)
        assert store.delete("s", namespace=ACME)
        hits = store.recall("When do the billing backups run?", namespace=ACME, mode="dense", min_score=0)
        assert [h.memory.id for h in hits] == ["b"]
    conn = sqlite3.connect(db)
    ids = [r[0] for r in conn.execute("SELECT id FROM vectors")]
    tombstones = conn.execute("SELECT vector_id FROM vector_tombstones").fetchall()
    conn.close()
    assert ids == [5]  # migrated with its id
    assert tombstones == [(6,)]  # the deleted vector got a new id, never reused


def _version(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_every_write_of_a_namespace_bumps_only_its_generation(make_store: StoreOpener) -> None:
    """Inserts, replaces and deletes of any process bump the namespace's write generation, never another's."""
    with make_store(mode="lexical") as store:
        store.add_entry("first note", id="x", namespace=ACME)
        store.add_entry("other tenant note", id="y", namespace=BOBCO)
        before = _generations(store)
        store.add_entry("second note", id="x", namespace=ACME, replace=True)
        after_replace = _generations(store)
        store.delete("x", namespace=ACME)
        after_delete = _generations(store)
    assert after_replace["acme/web"] > before["acme/web"]
    assert after_delete["acme/web"] > after_replace["acme/web"]
    assert before["bobco/default"] == after_replace["bobco/default"] == after_delete["bobco/default"]


def _generations(store: MemoryStore) -> dict[str, int]:
    rows = sql_rows(store, "SELECT tenant_id, project_id, generation FROM namespaces")
    return {f"{t}/{p}": int(g) for t, p, g in rows}


# -- stateful: many namespaces, several handles on one file, every read path checked ---------

_WORDS = (
    "payroll",
    "export",
    "roadmap",
    "review",
    "billing",
    "backup",
    "deploy",
    "friday",
    "cluster",
    "lunch",
)
_SPACES = tuple(Namespace(tenant_id=t, project_id=p) for t in ("acme", "bobco") for p in ("web", "ops"))


class Tenants(RuleBasedStateMachine):
    """Interleaved writes, replaces, deletes and reindexes through three handles on one database."""

    databases: Callable[[], tuple[StoreOpener, Callable[[], None]]]
    """A fresh database of the engine under test, and how to remove it (set by the test)."""

    def __init__(self) -> None:
        super().__init__()
        self.opener, self.remove = self.databases()
        embedder = _shared_embedder()
        # Two hybrid handles (each with its own vector index, as two processes) and one
        # lexical handle that writes no vectors, as in the leak recipe.
        self.handles = (
            self.opener(mode="hybrid", embedder=embedder),
            self.opener(mode="hybrid", embedder=embedder),
            self.opener(mode="lexical"),
        )
        self.model: dict[tuple[Namespace, str], str] = {}
        self.serial = 0

    def teardown(self) -> None:
        """Close every handle and remove the database."""
        self.opener.close_all()
        self.remove()

    @rule(
        h=st.integers(0, 2),
        ns=st.sampled_from(_SPACES),
        words=st.lists(st.sampled_from(_WORDS), min_size=2, max_size=5),
    )
    def write(self, h: int, ns: Namespace, words: list[str]) -> None:
        """Write a new memory through any handle."""
        self.serial += 1
        text = f"{' '.join(words)} note {self.serial}"
        mid = self.handles[h].add_entry(text, namespace=ns)
        self.model[(ns, mid)] = text

    @precondition(lambda self: self.model)
    @rule(
        h=st.integers(0, 2),
        pick=st.randoms(use_true_random=False),
        words=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4),
    )
    def replace(self, h: int, pick: random.Random, words: list[str]) -> None:
        """Replace a memory's text under its id (it gets a new rowid)."""
        ns, mid = pick.choice(sorted(self.model, key=str))
        self.serial += 1
        text = f"{' '.join(words)} replaced {self.serial}"
        self.handles[h].add_entry(text, id=mid, namespace=ns, replace=True)
        self.model[(ns, mid)] = text

    @precondition(lambda self: self.model)
    @rule(h=st.integers(0, 2), pick=st.randoms(use_true_random=False))
    def delete(self, h: int, pick: random.Random) -> None:
        """Delete a memory, freeing its rowids."""
        ns, mid = pick.choice(sorted(self.model, key=str))
        assert self.handles[h].delete(mid, namespace=ns)
        del self.model[(ns, mid)]

    @rule(h=st.integers(0, 1))
    def reindex(self, h: int) -> None:
        """Re-embed what the lexical handle wrote without vectors."""
        self.handles[h].reindex()

    @invariant()
    def every_read_stays_in_its_namespace(self) -> None:
        """Every handle, every mode: each memory read back is this namespace's, with its current text."""
        for ns in _SPACES:
            mine = {mid: text for (space, mid), text in self.model.items() if space == ns}
            for h, handle in enumerate(self.handles):
                for mid, text in mine.items():
                    got = handle.get(mid, namespace=ns)
                    assert got is not None
                    assert got.text == text
                modes = ("lexical",) if h == 2 else ("dense", "hybrid", "lexical")
                for mode in modes:
                    for r in handle.recall(
                        "payroll roadmap billing deploy lunch", namespace=ns, mode=mode, min_score=0, limit=50
                    ):
                        assert mine.get(r.memory.id) == r.memory.text, (ns, mode, r.memory.id)
                        assert r.memory.namespace == ns


_EMBEDDER: list[Any] = []


def _shared_embedder() -> Any:
    if not _EMBEDDER:
        _EMBEDDER.append(load_default_embedder())
    return _EMBEDDER[0]


def test_no_read_path_crosses_namespaces(engine_name: str, request: pytest.FixtureRequest) -> None:
    """Whatever the handles write, replace, delete and reindex, no read leaves its namespace."""
    Tenants.databases = staticmethod(fresh_databases(engine_name, request))  # type: ignore[assignment]
    run_state_machine_as_test(
        Tenants, settings=settings(max_examples=15, stateful_step_count=15, deadline=None)
    )
