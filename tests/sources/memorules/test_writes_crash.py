"""Crash test of memorule atomicity: a writer killed with SIGKILL mid-stream, repeatedly.

SQLite-only: it checks the file (PRAGMA integrity_check, FTS5's integrity-check) after the
kills; PostgreSQL's kill test is `tests/sources/storage/postgres/test_concurrency.py`.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sources import MemoryStore, audit_events

ROOT = Path(__file__).resolve().parents[3]
ROUNDS = 5

# The writer acknowledges a write (one stdout line) only after `remember`/`update_memorule`
# returned, i.e. after the commit. Logging is silenced so stdout carries only the acks.
WRITER = """
import logging, sys
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
from broker import Namespace
from sources import MemoryStore, WriterSession, remember, update_memorule

store = MemoryStore.open(sys.argv[1], mode="lexical")
ns = Namespace(tenant_id="acme", project_id="crash")
prefix = sys.argv[2]
session = WriterSession(session_id=prefix, persona="writer")
i = 0
while True:
    rid = remember(
        store,
        kind="memorule",
        namespace=ns,
        id=f"{prefix}-{i}",
        memorule_kind="feedback",
        subject=f"Rule number {i}",
        body="Write the audit event in the same transaction as the write " + "padding " * (i % 40),
        applies_to={"scope": "project", "persona": "writer"},
        evidence_signal_id=f"sig-{i}",
        session=session,
    )
    print("create", rid, flush=True)
    if i % 3 == 2:
        target = f"{prefix}-{i - 1}"
        body = f"Updated body of rule {i - 1}."
        state = update_memorule(store, target, namespace=ns, session=session, body=body)
        print("update", target, state.version, flush=True)
    i += 1
"""


def _run_and_kill(db: Path, prefix: str, rng: random.Random) -> list[list[str]]:
    """Start a writer, let it write for a random while, SIGKILL it; return complete ack lines."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    lines: list[bytes] = []
    first = threading.Event()
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), prefix],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    ) as proc:
        stdout = proc.stdout
        assert stdout is not None

        def drain() -> None:
            for line in stdout:
                lines.append(line)
                first.set()
            first.set()

        reader = threading.Thread(target=drain)
        reader.start()
        try:
            assert first.wait(timeout=60), "writer never acknowledged a write"
            time.sleep(rng.uniform(0.05, 0.5))
            proc.send_signal(signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            reader.join(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"writer exited with {proc.returncode} before the kill"
    # A line cut by the kill has no newline: it was not acknowledged.
    return [line.decode().split() for line in lines if line.endswith(b"\n")]


def _check(db: Path, created: set[str], updated: dict[str, int]) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for ns_id, n_docs in conn.execute("SELECT ns_id, n_docs FROM namespaces").fetchall():
            table = f"fts_{int(ns_id)}"
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == n_docs
        entries = {
            r[0]: int(r[1])
            for r in conn.execute(
                "SELECT e.id, (SELECT count(*) FROM memorule_states s WHERE s.entry_rowid = e.rowid) "
                "FROM entries e WHERE e.kind = 'memorule'"
            )
        }
        events: dict[str, list[str]] = {}
        for memorule_id, action in conn.execute(
            "SELECT memorule_id, action FROM memorule_audit ORDER BY rowid"
        ):
            events.setdefault(memorule_id, []).append(action)
        orphans = conn.execute(
            "SELECT count(*) FROM memorule_states s LEFT JOIN entries e ON e.rowid = s.entry_rowid "
            "WHERE e.rowid IS NULL"
        ).fetchone()[0]
    finally:
        conn.close()
    # Every acknowledged write is there, with its event.
    assert created <= set(entries)
    for rid, version in updated.items():
        assert entries[rid] >= version
        assert events[rid].count("update") >= version - 1
    # No event without its write, and no write without its event: one event per state.
    assert set(events) == set(entries)
    for rid, states in entries.items():
        assert events[rid][0] == "create"
        assert events[rid].count("create") == 1
        assert len(events[rid]) == states
    assert orphans == 0


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killed_writers_never_split_a_write_from_its_event(tmp_path: Path) -> None:
    """After repeated SIGKILLs, acked writes have their events, and every event its write."""
    db = tmp_path / "crash.db"
    MemoryStore.open(db, mode="lexical").close()  # migrate once, outside the kills
    rng = random.Random(94)  # noqa: S311 - kill timing, not cryptography
    created: set[str] = set()
    updated: dict[str, int] = {}
    for round_ in range(ROUNDS):
        for ack in _run_and_kill(db, f"r{round_}", rng):
            if ack[0] == "create":
                created.add(ack[1])
            else:
                updated[ack[1]] = max(updated.get(ack[1], 0), int(ack[2]))
        _check(db, created, updated)
    assert len(created) >= ROUNDS
    with MemoryStore.open(db, mode="lexical") as store:
        assert {e.memorule_id for e in audit_events(store) if e.action == "create"} >= created
