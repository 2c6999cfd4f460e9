"""The SQLite reader's turn-time statements."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker import Namespace
from sources import MemoryStore, NewEntry

if TYPE_CHECKING:
    from pathlib import Path

NS = Namespace(tenant_id="t")


def test_the_ends_of_the_text_log_and_the_tombstones_are_read_off_the_key_never_by_a_scan(
    tmp_path: Path,
) -> None:
    """Every turn reads both logs' bounds: each aggregate is a key look-up, so a long log costs nothing."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        store.add_entries([NewEntry(text=f"note {i} about the deploy") for i in range(50)], namespace=NS)
        with store.engine.read() as reader:
            statements: list[str] = []
            reader.conn.set_trace_callback(statements.append)
            assert reader.text_log_bounds() == (1, 50)
            assert reader.tombstone_bounds() == (0, 0)
            reader.conn.set_trace_callback(None)
            plans = [row[3] for sql in statements for row in reader.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    assert len(statements) == 2
    assert not [p for p in plans if p.startswith("SCAN") and "CONSTANT" not in p], plans


def test_a_snapshot_reads_a_namespaces_id_and_generation_once(tmp_path: Path) -> None:
    """A turn asks a read for the namespace's id and generation a dozen times: one statement each."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        store.add_entries([NewEntry(text="the deploy runs on Fridays")], namespace=NS)
        with store.engine.read() as reader:
            statements: list[str] = []
            reader.conn.set_trace_callback(statements.append)
            ids = {reader.namespace_id(NS) for _ in range(5)}
            generations = {reader.generation(next(iter(ids)) or 0) for _ in range(5)}
            assert reader.namespace_id(Namespace(tenant_id="nobody")) is None
            assert reader.namespace_id(Namespace(tenant_id="nobody")) is None
            reader.conn.set_trace_callback(None)
    assert len(ids) == len(generations) == 1
    assert len(statements) == 3
