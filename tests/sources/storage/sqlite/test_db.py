"""The one SQLite file: creation rules, durability settings, and errors that keep their cause."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from broker import ConfigError, Namespace
from sources import MemoryStore, StoreError
from sources.storage._sqlite._db import Database

NS = Namespace(tenant_id="t")


def _fill_until_full(store: MemoryStore, attempts: int) -> list[str]:
    """Cap the file a few pages above its size, then write until every write fails."""
    conn = store.engine.database._writer
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 3}")
    messages = []
    for i in range(attempts):
        try:
            store.add_entry(f"entry {i} " + f"word{i} " * 300, namespace=NS)
        except StoreError as exc:
            messages.append(str(exc))
    return messages


def test_full_disk_reports_the_full_disk_not_the_rollback(tmp_path: Path) -> None:
    """SQLITE_FULL rolls back by itself; the error the user sees must still be the full disk."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        store.add_entry("kept before the disk filled up", id="kept", namespace=NS)
        messages = _fill_until_full(store, attempts=30)
        assert len(messages) >= 25
        assert all("database or disk is full" in m for m in messages), messages
        assert not any("cannot rollback" in m for m in messages)
        store.engine.database._writer.execute("PRAGMA max_page_count = 1073741823")
        store.add_entry("written once there is room again", id="after", namespace=NS)
        assert store.get("kept", namespace=NS) is not None
        assert store.get("after", namespace=NS) is not None
    conn = sqlite3.connect(tmp_path / "m.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_without_create_a_missing_file_is_an_error_and_nothing_is_made(tmp_path: Path) -> None:
    """A mistyped --db of a read-only command must not leave directories and an empty store."""
    target = tmp_path / "typo" / "memory.db"
    with pytest.raises(StoreError, match="no such database"):
        Database.open(target, create=False)
    assert not (tmp_path / "typo").exists()


def test_without_create_an_empty_file_is_an_error_and_stays_empty(tmp_path: Path) -> None:
    """A zero-byte file given to a reading command is refused, not turned into a store."""
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(StoreError, match="an empty file, not a database"):
        MemoryStore.open(path, mode="lexical", create=False)
    assert path.stat().st_size == 0
    with MemoryStore.open(path, mode="lexical") as store:  # a writing command may make it a store
        assert store.stats()["entries"] == 0


def test_readers_never_recreate_a_deleted_file(tmp_path: Path) -> None:
    """A reader connecting after the file vanished fails instead of making an empty database."""
    path = tmp_path / "m.db"
    db = Database.open(path)
    try:
        db._writer.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        with pytest.raises(StoreError), db.read() as conn:
            conn.execute("SELECT 1")
        assert not path.exists()
    finally:
        db._writer = sqlite3.connect(":memory:")
        db.close()


@pytest.mark.parametrize(
    ("relative", "cause"),
    [("taken/m.db", "File exists"), ("taken/sub/m.db", "Not a directory")],
    ids=["FileExistsError", "NotADirectoryError"],
)
def test_uncreatable_parent_directory_is_one_store_error(tmp_path: Path, relative: str, cause: str) -> None:
    """A failing mkdir (its OSError) becomes one StoreError naming the path and the cause, never a traceback."""
    (tmp_path / "taken").write_text("a file where a directory should be")
    with pytest.raises(StoreError, match=f"cannot create its directory \\({cause}\\)") as info:
        Database.open(tmp_path / relative)
    assert str(tmp_path / relative) in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_parent_directory_is_one_store_error(tmp_path: Path) -> None:
    """PermissionError from mkdir is one StoreError (the CLI test covers root via another user)."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(StoreError, match="Permission denied"):
            Database.open(locked / "sub" / "m.db")
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize(("durability", "synchronous"), [("normal", 1), ("full", 2)])
def test_durability_sets_the_synchronous_level(tmp_path: Path, durability: str, synchronous: int) -> None:
    """`full` fsyncs every commit (synchronous=FULL); `normal` is WAL with synchronous=NORMAL."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical", durability=durability) as store:
        conn = store.engine.database._writer
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == synchronous
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.engine.durability == durability


def test_unknown_durability_is_a_config_error_before_the_file_is_touched(tmp_path: Path) -> None:
    """A typo in the option is a ConfigError and creates nothing."""
    with pytest.raises(ConfigError, match="durability"):
        MemoryStore.open(tmp_path / "m.db", mode="lexical", durability="paranoid")
    assert not (tmp_path / "m.db").exists()


_FULL_DISK_WRITES = """
from broker import Namespace
from sources import StoreError
from sources import MemoryStore, NewEntry

ns = Namespace(tenant_id="t")
store = MemoryStore.open(HERE / "memory.db", mode="lexical")
store.add_entries([NewEntry(text=f"kept {i}: deploys freeze on Fridays", id=f"k{i}") for i in range(50)], namespace=ns)
fill()
errors, written = [], 0
for i in range(30):
    try:
        if i % 3 == 0:
            store.add_entries([NewEntry(text=f"batch {i}.{j} " + "word " * 300) for j in range(5)], namespace=ns)
        else:
            store.add_entry(f"note {i} " + "word " * (50 * i), namespace=ns)
        written += 1
    except StoreError as exc:
        errors.append(str(exc))
free()
store.add_entry("written once there is room again", id="after", namespace=ns)
kept = sum(store.get(f"k{i}", namespace=ns) is not None for i in range(50))
store.close()
import sqlite3
conn = sqlite3.connect(HERE / "memory.db")
report({
    "errors": errors,
    "written": written,
    "kept": kept,
    "integrity": conn.execute("PRAGMA integrity_check").fetchone()[0],
    "after": conn.execute("SELECT count(*) FROM entries WHERE id = 'after'").fetchone()[0],
})
"""


def test_a_really_full_disk_is_reported_as_full_and_loses_nothing(on_small_disk) -> None:
    """30 writes on a full filesystem (ENOSPC, not a page cap): each error names the full disk."""
    got = on_small_disk(_FULL_DISK_WRITES, size="1m")
    assert len(got["errors"]) == 30 - got["written"] >= 25
    assert all("database or disk is full" in e for e in got["errors"]), got["errors"]
    assert not any("cannot rollback" in e for e in got["errors"])
    assert (got["kept"], got["integrity"], got["after"]) == (50, "ok", 1)


def test_a_reader_whose_rollback_failed_is_dropped_not_pooled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader left inside its snapshot by a failed ROLLBACK is closed and dropped from the pool: the next read gets a clean connection and sees the latest commit."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        database = store.engine.database
        monkeypatch.setattr("sources.storage._sqlite._db.rollback", lambda _conn: None)  # it failed, logged
        with database.read() as conn:
            conn.execute("SELECT count(*) FROM namespaces").fetchone()
            stuck = conn
        monkeypatch.undo()
        assert stuck not in database._all_readers
        store.add_entry("written after the failed rollback", namespace=NS)
        with database.read() as conn:
            assert conn is not stuck
            assert conn.execute("SELECT count(*) FROM namespaces").fetchone()[0] == 1
