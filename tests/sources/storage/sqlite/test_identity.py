"""Whose file is this: our stores are marked, other databases and newer schemas are refused
before anything is written, and stores of earlier versions still open (and get marked)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from broker import Namespace
from sources import MemoryStore, StoreError
from sources.storage._sqlite._identity import APPLICATION_ID
from sources.storage._sqlite._schema import MIGRATIONS, SCHEMA_VERSION

NS = Namespace(tenant_id="t")


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _pragma(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])
    finally:
        conn.close()


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
    conn.commit()
    conn.close()


def _legacy(path: Path, steps: int = SCHEMA_VERSION) -> None:
    """A store as earlier versions wrote it: migrated, with no application_id."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    version = 0
    while version < steps:
        conn.execute("BEGIN IMMEDIATE")
        MIGRATIONS[version](conn)
        version += 1
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    conn.close()


def test_a_new_store_is_marked_as_ours(tmp_path: Path) -> None:
    """Every file we create carries our application_id, so we can tell it from others later."""
    MemoryStore.open(tmp_path / "m.db", mode="lexical").close()
    assert _pragma(tmp_path / "m.db", "application_id") == APPLICATION_ID
    assert _pragma(tmp_path / "m.db", "user_version") == SCHEMA_VERSION


def test_an_empty_file_becomes_a_new_store(tmp_path: Path) -> None:
    """A zero-byte file (e.g. from `touch`) is nobody's database yet: it becomes ours."""
    (tmp_path / "m.db").touch()
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        store.add_entry("first memory in a touched file", namespace=NS)
    assert _pragma(tmp_path / "m.db", "application_id") == APPLICATION_ID


def test_another_programs_database_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    """A database holding other tables is not ours: no tables, no WAL, no version added."""
    _foreign(tmp_path / "shop.db")
    before = _snapshot(tmp_path)
    with pytest.raises(StoreError, match=r"not a context-broker database \(it holds customers\)"):
        MemoryStore.open(tmp_path / "shop.db", mode="lexical")
    assert _snapshot(tmp_path) == before


def test_a_foreign_application_id_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    """A file another application marked as its own is refused even if it looks empty."""
    conn = sqlite3.connect(tmp_path / "other.db")
    conn.execute("PRAGMA application_id = 1234")
    conn.close()
    before = _snapshot(tmp_path)
    with pytest.raises(StoreError, match=r"application_id 0x4d2"):
        MemoryStore.open(tmp_path / "other.db", mode="lexical")
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_a_newer_schema_is_refused_and_left_unchanged(tmp_path: Path, marked: bool) -> None:
    """A store written by newer code is not silently used by older code."""
    path = tmp_path / "m.db"
    MemoryStore.open(path, mode="lexical").close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    if not marked:
        conn.execute("PRAGMA application_id = 0")
    conn.close()
    before = _snapshot(tmp_path)
    with pytest.raises(
        StoreError, match=f"schema version 99 is newer than .*supports \\({SCHEMA_VERSION}\\)"
    ):
        MemoryStore.open(path, mode="lexical")
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("steps", range(1, SCHEMA_VERSION + 1))
def test_a_store_of_an_earlier_version_opens_migrates_and_is_marked(tmp_path: Path, steps: int) -> None:
    """Users' existing files (user_version 1..3, no application_id) must not be stranded."""
    path = tmp_path / "m.db"
    _legacy(path, steps)
    with MemoryStore.open(path, mode="lexical") as store:
        store.add_entry("written after the upgrade", id="new", namespace=NS)
        assert store.get("new", namespace=NS) is not None
    assert _pragma(path, "application_id") == APPLICATION_ID
    assert _pragma(path, "user_version") == SCHEMA_VERSION


def test_an_unmarked_store_keeps_its_memories_when_marked(tmp_path: Path) -> None:
    """A version-3 file from before marking (the same schema, application_id 0) keeps its data."""
    path = tmp_path / "m.db"
    with MemoryStore.open(path, mode="lexical") as store:
        store.add_entry("Deploys freeze every Friday after the payment incident", id="old", namespace=NS)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 0")
    conn.close()
    with MemoryStore.open(path, mode="lexical") as store:
        assert store.get("old", namespace=NS) is not None
        assert [r.memory.id for r in store.recall("payment incident freeze", namespace=NS)] == ["old"]
    assert _pragma(path, "application_id") == APPLICATION_ID


def test_marking_an_up_to_date_store_twice_is_harmless(tmp_path: Path) -> None:
    """Opening is idempotent: the second open of a marked store changes nothing."""
    path = tmp_path / "m.db"
    MemoryStore.open(path, mode="lexical").close()
    before = _snapshot(tmp_path)
    MemoryStore.open(path, mode="lexical").close()
    assert _snapshot(tmp_path) == before
