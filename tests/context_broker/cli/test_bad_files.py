"""Files that are not a usable store of ours: every command says so in one line, exits 2, and
leaves every file exactly as it was.

Random bytes, a truncated store, flipped pages, another program's database, another
application's file, a newer schema, a directory, a read-only file or directory, a full disk.
A WAL file of garbage is not damage (SQLite ignores a WAL without a valid header, as after a
crash before its header was synced): the store opens with nothing lost.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from broker import Namespace
from sources import MemoryStore, NewEntry, WriterSession, remember

ROOT = Path(__file__).resolve().parents[3]
NS = Namespace(tenant_id="default")

READERS: tuple[tuple[str, ...], ...] = (
    ("stats",),
    ("recall", "deploy freeze payment", "--mode", "lexical"),
    ("select", "deploy freeze payment", "--mode", "lexical"),
    ("explain", "deploy freeze payment", "--mode", "lexical"),
    ("audit",),
    ("memorule", "history", "r1"),
)
WRITERS: tuple[tuple[str, ...], ...] = (
    ("remember", "A new note about the deploy freeze"),
    ("memorule", "update", "r1", "--confidence", "observed", "--persona", "donna"),
    ("memorule", "delete", "r1", "--persona", "donna"),
)


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file of a directory with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed (checkpointed) store of a few hundred notes and one memorule."""
    path = tmp_path_factory.mktemp("good") / "memory.db"
    with MemoryStore.open(path, mode="lexical") as store:
        notes = [
            NewEntry(text=f"Note {i}: deploys freeze on day {i % 7} after payment incident {i}")
            for i in range(400)
        ]
        store.add_entries(notes, namespace=NS)
        remember(
            store,
            kind="memorule",
            namespace=NS,
            id="r1",
            memorule_kind="convention",
            subject="Deploy freeze",
            body="Never deploy the payment service on a Friday afternoon.",
            applies_to={"scope": "project"},
            session=WriterSession(session_id="s", persona="p"),
        )
    return path


def _random_bytes(db: Path, good: Path, rng: random.Random) -> None:
    db.write_bytes(rng.randbytes(good.stat().st_size // 4))


def _truncated(db: Path, good: Path, rng: random.Random) -> None:
    data = good.read_bytes()
    db.write_bytes(data[: rng.randrange(4096, len(data) - 4096)])


def _flipped_pages(db: Path, good: Path, rng: random.Random) -> None:
    """Every page but the first (the schema) gets a run of inverted bytes."""
    data = bytearray(good.read_bytes())
    page = 4096
    for start in range(page, len(data), page):
        at = start + rng.randrange(0, page - 64)
        data[at : at + 64] = bytes(b ^ 0xFF for b in data[at : at + 64])
    db.write_bytes(bytes(data))


def _foreign(db: Path, good: Path, rng: random.Random) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
    conn.commit()
    conn.close()


def _other_application(db: Path, good: Path, rng: random.Random) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE entries (x)")
    conn.commit()
    conn.close()


def _newer_schema(db: Path, good: Path, rng: random.Random) -> None:
    shutil.copy(good, db)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()


def _directory(db: Path, good: Path, rng: random.Random) -> None:
    db.mkdir()


BAD: dict[str, tuple[Callable[[Path, Path, random.Random], None], str]] = {
    "random-bytes": (_random_bytes, "not a usable SQLite database"),
    "truncated": (_truncated, "not a usable SQLite database"),
    "flipped-pages": (_flipped_pages, "not a usable SQLite database|damaged database"),
    "foreign-database": (_foreign, r"not a context-broker database \(it holds customers\)"),
    "other-application": (_other_application, r"not a context-broker database \(application_id 0x4d2\)"),
    "newer-schema": (_newer_schema, "schema version 99 is newer than this context-broker supports"),
    "directory": (_directory, "is a directory, not a database file"),
}


@pytest.mark.parametrize("command", READERS + WRITERS, ids=lambda c: "-".join(c[:2]))
@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_file_is_one_line_exit_2_and_unchanged(tmp_path: Path, good: Path, cli, kind, command) -> None:
    """No command uses, repairs, converts or half-writes a file that is not a usable store of ours."""
    make, message = BAD[kind]
    db = tmp_path / "memory.db"
    make(db, good, random.Random(f"{kind}-{command}"))  # noqa: S311 - damage, not secrets
    before = snapshot(tmp_path)
    ran = cli("--db", str(db), *command)
    assert ran.status == 2, ran
    assert len(ran.err_lines) == 1, ran.err_lines
    assert ran.err_lines[0].startswith("error: ")
    assert re.search(message, ran.err_lines[0]), ran.err_lines[0]
    assert ran.out == ""
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", READERS + WRITERS[1:], ids=lambda c: "-".join(c[:2]))
def test_a_missing_file_is_created_by_no_reading_command(tmp_path: Path, cli, command) -> None:
    """A mistyped --db must not leave directories and an empty store behind a reading command."""
    db = tmp_path / "typo" / "memory.db"
    ran = cli("--db", str(db), *command)
    assert ran.status == 2, ran
    assert ran.err_lines == (f"error: {db}: no such database (this command never creates one)",)
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("relative", ["taken/memory.db", "taken/sub/memory.db", "typo/sub/memory.db"])
@pytest.mark.parametrize("command", ["remember", "demo", "ingest"])
def test_a_named_store_is_created_only_in_a_directory_that_exists(
    tmp_path: Path, cli, relative: str, command: str
) -> None:
    """A --db whose directory is missing (or is a file) is one line, exit 2, and nothing is made:
    no directory, no empty store."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "taken").write_text("a file, not a directory")
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"text": "A note that has nowhere to go"}\n')
    args = {"remember": ("remember", "A note that has nowhere to go"), "demo": ("demo",)}
    db = work / relative
    ran = cli("--db", str(db), *args.get(command, ("ingest", str(notes))))
    assert ran.status == 2, ran
    why = f"{db.parent} is not a directory" if relative == "taken/memory.db" else f"no directory {db.parent}"
    tail = (
        "(nothing was written)" if relative == "taken/memory.db" else "(create it first; nothing was written)"
    )
    assert ran.err_lines == (f"error: {db}: {why} {tail}",)
    assert sorted(p.name for p in work.iterdir()) == ["taken"]


def test_a_store_named_by_the_environment_is_checked_too(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$CONTEXT_BROKER_DB (here a sqlite:/// URL) naming a missing directory: one line, exit 2."""
    db = tmp_path / "typo" / "memory.db"
    monkeypatch.setenv("CONTEXT_BROKER_DB", f"sqlite:///{db}")
    ran = cli("remember", "A note that has nowhere to go")
    assert ran.status == 2, ran
    assert ran.err_lines == (f"error: {db}: no directory {db.parent} (create it first; nothing was written)",)
    assert list(tmp_path.iterdir()) == []


def test_a_garbage_wal_loses_nothing(tmp_path: Path, good: Path, cli) -> None:
    """A WAL without a valid header holds no commit: the store opens, every memory is there."""
    db = tmp_path / "memory.db"
    shutil.copy(good, db)
    Path(f"{db}-wal").write_bytes(random.Random(7).randbytes(64 * 1024))  # noqa: S311
    ran = cli("--db", str(db), "stats", "--json")
    assert ran.status == 0, ran
    assert json.loads(ran.out)["entries"] == 401
    ran = cli("--db", str(db), "remember", "Written after the garbage WAL was dropped", "--kind", "note")
    assert ran.status == 0, ran
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 402
    conn.close()


# -- through a real process: read-only files and directories, a full disk ---------------------

# Root ignores permission bits; without these two capabilities it obeys them like anyone.
_AS_ROOT_WITHOUT_OVERRIDE = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search")


def _run_cli(db: Path | None, *args: str, data_home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a real process, subject to file permissions even when the tests run as root
    (`db` None: the default store, under `data_home`)."""
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permissions cannot apply")
        prefix = _AS_ROOT_WITHOUT_OVERRIDE
    return subprocess.run(
        [*prefix, sys.executable, "-m", "context_broker", *(("--db", str(db)) if db else ()), *args],
        capture_output=True,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if k != "CONTEXT_BROKER_DB"},
            "PYTHONPATH": str(ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
            **({"XDG_DATA_HOME": str(data_home)} if data_home else {}),
        },
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
@pytest.mark.parametrize(
    ("what", "command"),
    [("file", ("remember", "A note for a read-only store", "--kind", "note")), ("directory", ("stats",))],
    ids=["file-remember", "directory-stats"],
)
def test_a_read_only_store_is_one_line_and_unchanged(tmp_path: Path, good: Path, what, command) -> None:
    """A read-only file or directory is refused up front: even a reader would leave -wal/-shm behind."""
    home = tmp_path / "store"
    home.mkdir()
    db = home / "memory.db"
    shutil.copy(good, db)
    locked = db if what == "file" else home
    locked.chmod(0o444 if what == "file" else 0o555)
    try:
        before = snapshot(home)
        result = _run_cli(db, *command)
        after = snapshot(home)
    finally:
        locked.chmod(0o644 if what == "file" else 0o755)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {db}: ")
    assert "read-only" in lines[0]
    assert after == before


_FULL_DISK_CLI = """
import contextlib, hashlib, io, sqlite3
from broker import Namespace
from context_broker._cli import main
from sources import MemoryStore, NewEntry

db = HERE / "memory.db"
with MemoryStore.open(db, mode="lexical") as store:
    store.add_entries([NewEntry(text=f"kept {i}: deploys freeze") for i in range(50)], namespace=Namespace(tenant_id="default"))
(HERE / "batch.jsonl").write_text("".join('{"text": "batch note %d %s"}\\n' % (i, "word " * 1000) for i in range(8)))
digest = hashlib.sha256(db.read_bytes()).hexdigest()
runs = []
for leave in (0, 40_000):
    fill(leave)
    for argv in (["remember", "A note about the deploy freeze " * 30, "--kind", "note"], ["ingest", str(HERE / "batch.jsonl")]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = main(["--db", str(db), "--log-level", "error", *argv])
        runs.append({"leave": leave, "command": argv[0], "status": status, "lines": [l for l in err.getvalue().splitlines() if l.strip()]})
    free()
conn = sqlite3.connect(db)
report({
    "runs": runs,
    "unchanged": hashlib.sha256(db.read_bytes()).hexdigest() == digest,
    "entries": conn.execute("SELECT count(*) FROM entries").fetchone()[0],
    "integrity": conn.execute("PRAGMA integrity_check").fetchone()[0],
})
"""


def test_a_full_disk_is_one_line_exit_2_and_loses_nothing(on_small_disk) -> None:
    """On a full filesystem every write command says the disk is full, in one line, and the store is intact."""
    got = on_small_disk(_FULL_DISK_CLI, size="1m")
    assert len(got["runs"]) == 4
    for run in got["runs"]:
        assert run["status"] == 2, run
        assert len(run["lines"]) == 1, run
        assert re.search(r"database or disk is full|no space left on the device", run["lines"][0]), run
    assert (got["unchanged"], got["entries"], got["integrity"]) == (True, 50, "ok")


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX permissions; XDG_DATA_HOME is read on Linux")
def test_a_directory_that_cannot_be_created_for_permissions_is_one_line(tmp_path: Path) -> None:
    """The default store's directory (made on first use) refused by mkdir's PermissionError (even
    for root, without its override) is one line, exit 2."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        result = _run_cli(
            None, "remember", "A note with nowhere to go", "--kind", "note", data_home=locked / "sub"
        )
    finally:
        locked.chmod(0o755)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    db = locked / "sub" / "context-broker" / "memory.db"
    assert lines == [f"error: {db}: cannot create its directory (Permission denied)"]
    assert list(locked.iterdir()) == []
