"""The PostgreSQL database on a real server: clear errors, the tenant wall, and statements cut
at the deadline or by a killed writer leaving nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from pg_kit import write_audit, write_memorule
from pg_server import require

from broker import BrokerClosedError, ConfigError
from sources import StoreError
from sources.storage._postgres import PostgresDatabase, Session, StatementCancelledError, _schema

if TYPE_CHECKING:
    from collections.abc import Iterator

psycopg = require("psycopg")

ROOT = Path(__file__).resolve().parents[4]
TABLES_WRITTEN = ("namespaces", "entries", "memorule_states", "memorule_audit")


@pytest.fixture
def db(pg_url: str) -> Iterator[PostgresDatabase]:
    """A migrated database with a pool of two connections."""
    database = PostgresDatabase.open(pg_url, connections=2)
    yield database
    database.close()


def _counts(db: PostgresDatabase, tenant: str | None) -> dict[str, int]:
    """Rows of each written table that `tenant` sees, with no filter of ours in the query."""
    with db.transaction(tenant) as s:
        return {t: int(s.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES_WRITTEN}  # type: ignore[index]


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["mysql://host/db", "postgresql://host/db?no_such_option=1", "sqlite:///m.db"]
)
def test_a_bad_url_is_a_config_error(url: str) -> None:
    """A URL that is not PostgreSQL's, or that libpq cannot parse, fails before connecting."""
    with pytest.raises(ConfigError):
        PostgresDatabase.open(url)


def test_an_unreachable_server_is_a_store_error(tmp_path: Path) -> None:
    """No server at the address: a one-line StoreError naming it, without its password."""
    url = f"postgresql://u:secret@/db?host={tmp_path}"
    with pytest.raises(StoreError, match="unreachable") as info:
        PostgresDatabase.open(url, connect_timeout=2)
    assert "secret" not in str(info.value)
    assert "\n" not in str(info.value)


def test_the_missing_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the driver installed, asking for PostgreSQL names the extra to install."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigError, match=r"context-broker\[postgres\]"):
        PostgresDatabase.open("postgresql://host/db")


def test_a_closed_database_refuses_work(db: PostgresDatabase) -> None:
    """Use after close is BrokerClosedError, not a driver error."""
    db.close()
    with pytest.raises(BrokerClosedError), db.transaction("alice"):
        pass


# -- the tenant wall --------------------------------------------------------------------------


def test_a_tenant_reads_none_of_another_tenants_rows(db: PostgresDatabase) -> None:
    """A query with no namespace filter still sees only the transaction's tenant's rows."""
    for tenant in ("alice", "bob"):
        with db.transaction(tenant, write=True) as s:
            write_memorule(s)
            write_audit(s)
    assert _counts(db, "alice") == dict.fromkeys(TABLES_WRITTEN, 1)
    assert _counts(db, "carol") == dict.fromkeys(TABLES_WRITTEN, 0)
    with db.transaction("alice") as s:
        tenants = {r[0] for r in s.execute("SELECT tenant_id FROM entries").fetchall()}
    assert tenants == {"alice"}


def test_no_tenant_set_reads_nothing(db: PostgresDatabase) -> None:
    """A transaction that never named a tenant sees no row at all."""
    with db.transaction("alice", write=True) as s:
        write_memorule(s)
    assert _counts(db, None) == dict.fromkeys(TABLES_WRITTEN, 0)


def test_writing_another_tenants_row_is_refused(db: PostgresDatabase) -> None:
    """A row claimed for another tenant violates the policy: StoreError, nothing written."""
    with pytest.raises(StoreError, match="row-level security"), db.transaction("alice", write=True) as s:
        s.execute("INSERT INTO namespaces (tenant_id, project_id) VALUES ('bob', 'p')")
    assert _counts(db, "bob")["namespaces"] == 0


def test_all_tenants_lifts_the_wall_for_its_block_only(db: PostgresDatabase) -> None:
    """Upkeep that spans tenants sees every row inside its block, and one tenant after it."""
    for tenant in ("alice", "bob"):
        with db.transaction(tenant, write=True) as s:
            write_memorule(s)
    with db.transaction("alice") as s:
        with s.all_tenants():
            inside = s.execute("SELECT count(*) FROM entries").fetchone()
        after = s.execute("SELECT count(*) FROM entries").fetchone()
    assert (inside, after) == ((2,), (1,))


def test_an_error_inside_all_tenants_is_the_error_raised(db: PostgresDatabase) -> None:
    """A statement failing while the wall is lifted surfaces as itself, not as a failure to
    put the wall back in an aborted transaction."""
    with pytest.raises(StoreError, match="no_such_table"), db.transaction("alice") as s, s.all_tenants():
        s.execute("SELECT * FROM no_such_table")


def test_cancelled_statements_are_store_errors_and_timeouts() -> None:
    """A cancelled statement is a StoreError (the engine protocol) and a TimeoutError."""
    assert issubclass(StatementCancelledError, StoreError)
    assert issubclass(StatementCancelledError, TimeoutError)


def test_every_connection_runs_as_the_application_role(db: PostgresDatabase) -> None:
    """Whatever role the URL names, statements run as the role the policies bind."""
    with db.transaction("alice") as s:
        assert s.execute("SELECT current_user").fetchone() == (_schema.APP_ROLE,)


# -- cut at the deadline ----------------------------------------------------------------------


def _slow_write(s: Session) -> None:
    s.execute("INSERT INTO namespaces (project_id) VALUES ('p')")
    s.execute("SELECT pg_sleep(30)")


def _running_sleeps(pg_url: str) -> int:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep%%'"
        ).fetchone()
    return int(row[0])


async def test_a_statement_cut_by_cancellation_is_cancelled_on_the_server(
    db: PostgresDatabase, pg_url: str
) -> None:
    """Cancelling the caller cancels the running statement (no deadline, so no statement
    timeout: the interrupt alone) and rolls its transaction back."""
    started = time.monotonic()
    async with anyio.create_task_group() as tg:

        async def cut() -> None:
            await anyio.sleep(0.3)
            tg.cancel_scope.cancel()

        tg.start_soon(cut)
        await db.run("alice", _slow_write, write=True)
    assert time.monotonic() - started < 3
    assert _running_sleeps(pg_url) == 0
    assert _counts(db, "alice")["namespaces"] == 0


async def test_a_stop_between_statements_stops_the_next_one(db: PostgresDatabase) -> None:
    """A cut that lands while no statement runs still stops every later statement."""

    def write_after_a_pause(s: Session) -> None:
        s.use_tenant("alice")
        time.sleep(0.5)  # the cut lands here, between two statements
        s.execute("INSERT INTO namespaces (project_id) VALUES ('p')")

    with anyio.move_on_after(0.2) as scope:
        await db.run(None, write_after_a_pause, write=True)
    assert scope.cancelled_caught
    assert _counts(db, "alice")["namespaces"] == 0


async def test_the_deadline_sets_the_servers_statement_timeout(db: PostgresDatabase) -> None:
    """A unit run under a deadline carries it to the server as its statement timeout."""
    with anyio.fail_after(5):
        timeout = await db.run("alice", lambda s: s.execute("SHOW statement_timeout").fetchone())
    assert timeout is not None
    assert timeout[0] not in ("0", "0ms")


def test_a_statement_past_its_timeout_is_a_timeout_error(db: PostgresDatabase) -> None:
    """The server's own wall: a statement past the transaction's timeout fails, rolled back."""
    with (
        pytest.raises(StatementCancelledError, match="statement timeout"),
        db.transaction("alice", write=True, timeout=0.3) as s,
    ):
        _slow_write(s)
    assert _counts(db, "alice")["namespaces"] == 0


async def test_a_cut_connection_serves_the_next_unit(pg_url: str) -> None:
    """After a cut the pool's one connection comes back clean: the next unit succeeds."""
    db = PostgresDatabase.open(pg_url, connections=1)
    try:
        with anyio.move_on_after(0.3):
            await db.run("alice", _slow_write, write=True)
        with anyio.fail_after(5):
            row = await db.run("alice", lambda s: s.execute("SELECT count(*) FROM namespaces").fetchone())
        assert row == (0,)
    finally:
        db.close()


def test_it_runs_under_asyncio_too(db: PostgresDatabase) -> None:
    """The worker threads and the interrupt are anyio's: asyncio hosts get the same cut."""

    async def main() -> int:
        with anyio.move_on_after(0.3):
            await db.run("alice", _slow_write, write=True)
        row = await db.run("alice", lambda s: s.execute("SELECT count(*) FROM namespaces").fetchone())
        return int(row[0])

    assert anyio.run(main, backend="asyncio") == 0


# -- a killed writer ---------------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[3])
    from pg_kit import write_audit, write_memorule
    from sources.storage._postgres import PostgresDatabase

    db = PostgresDatabase.open(sys.argv[1], migrate=False)
    with db.transaction("alice", write=True) as s:
        write_memorule(s)
        print("written", flush=True)
        if sys.argv[2] == "pause":
            time.sleep(60)  # killed here: the memorule is written, its audit event not yet
        write_audit(s)
    print("committed", flush=True)
    """
)


@pytest.mark.parametrize("fate", ["killed", "finished"])
def test_a_writer_killed_mid_transaction_leaves_nothing(db: PostgresDatabase, pg_url: str, fate: str) -> None:
    """SIGKILL inside a write leaves no row, and no memorule without its audit event; a
    writer left to finish commits all of it (the control)."""
    args = [
        sys.executable,
        "-c",
        _WRITER,
        pg_url,
        "pause" if fate == "killed" else "go",
        str(Path(__file__).parent),
    ]
    with subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "written"
        if fate == "killed":
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    expected = 0 if fate == "killed" else 1
    assert _counts(db, "alice") == dict.fromkeys(TABLES_WRITTEN, expected)
    # The dead writer's locks are gone: the same rows can be written again.
    with db.transaction("alice", write=True, timeout=10) as s:
        write_memorule(s, project="p" if fate == "killed" else "q")
