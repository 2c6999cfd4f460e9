"""Tests of the shared source plumbing (`sources._source_base`): interruptible reads, lifecycle."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import anyio
import pytest

from broker import BrokerClosedError, Candidate, Namespace
from broker.abc import Source, SourceRequest
from sources import MemoryStore
from sources._source_base import ReaderSource
from sources._store_reader import StoreReader
from sources.storage._engine import ReadStop

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


# A statement that runs for minutes unless interrupted.
SLOW_SQL = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as s:
        yield s


class SlowSource(ReaderSource):
    """A source whose query never ends on its own (a test-only stand-in for a slow query)."""

    name = "slow"
    outcome: list[str]

    def _fetch_on(self, conn: sqlite3.Connection, *, request: SourceRequest) -> list[Candidate]:  # noqa: ARG002
        try:
            conn.execute(SLOW_SQL).fetchone()
        except sqlite3.OperationalError as exc:
            self.outcome.append(str(exc))
            raise
        self.outcome.append("finished")
        return []


async def test_slow_read_is_interrupted_at_the_deadline(store: MemoryStore) -> None:
    """A read still running when the caller's scope ends is interrupted, not abandoned."""
    reader = StoreReader(store=store)
    outcome: list[str] = []

    def slow(conn: sqlite3.Connection) -> int:
        try:
            return int(conn.execute(SLOW_SQL).fetchone()[0])
        except sqlite3.OperationalError as exc:
            outcome.append(str(exc))
            raise

    with anyio.move_on_after(0.05) as scope:
        await reader.run(slow)
    assert scope.cancelled_caught
    assert outcome == ["interrupted"]  # the thread had ended before run() returned
    assert await reader.run(lambda c: c.execute("SELECT 7").fetchone()[0]) == 7


async def test_slow_source_fetch_is_interrupted(store: MemoryStore) -> None:
    """A source's fetch cut by the caller's scope interrupts its SQLite statement."""
    source = SlowSource(StoreReader(store=store))
    source.outcome = []
    await source.open()
    with anyio.move_on_after(0.01) as scope:
        await source.fetch(SourceRequest(task="anything", namespace=Namespace(tenant_id="t")))
    assert scope.cancelled_caught
    assert source.outcome == ["interrupted"]


def test_interrupt_before_the_first_statement_is_not_lost(store: MemoryStore) -> None:
    """A cancellation that lands before the read starts still stops every statement of it."""
    reader = StoreReader(store=store)
    stop = ReadStop()
    stop.trip()
    ran: list[str] = []
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        reader._work(lambda _conn: ran.append("ran"), stop)
    assert ran == []


def test_interrupt_between_statements_stops_the_next_one(store: MemoryStore) -> None:
    """After an interrupt, the next statement of the same read aborts (progress handler)."""
    reader = StoreReader(store=store)
    stop = ReadStop()

    def two_steps(conn: sqlite3.Connection) -> None:
        conn.execute("SELECT 1").fetchone()
        stop.trip()  # as if the deadline passed between the two statements
        conn.execute(SLOW_SQL).fetchone()

    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        reader._work(two_steps, stop)
    # The connection went back to the pool clean: a new read runs normally.
    assert reader._work(lambda c: c.execute("SELECT 2").fetchone()[0], ReadStop()) == 2


async def test_closed_source_refuses_fetch(store: MemoryStore) -> None:
    """After aclose a source raises BrokerClosedError instead of touching the database."""
    source = SlowSource(StoreReader(store=store))
    source.outcome = []
    assert isinstance(source, Source)
    await source.open()
    await source.aclose()
    with pytest.raises(BrokerClosedError):
        await source.fetch(SourceRequest(task="x", namespace=Namespace(tenant_id="t")))
    assert source.outcome == []


def test_slow_read_is_interrupted_on_asyncio(store: MemoryStore) -> None:
    """The interrupt works on the asyncio backend too (most agent runtimes run asyncio)."""
    reader = StoreReader(store=store)
    outcome: list[str] = []

    def slow(conn: sqlite3.Connection) -> None:
        try:
            conn.execute(SLOW_SQL).fetchone()
        except sqlite3.OperationalError as exc:
            outcome.append(str(exc))
            raise

    async def main() -> bool:
        with anyio.move_on_after(0.05) as scope:
            await reader.run(slow)
        return scope.cancelled_caught

    assert anyio.run(main, backend="asyncio") is True
    assert outcome == ["interrupted"]
