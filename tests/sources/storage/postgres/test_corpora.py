"""The graph and the tasks of `PostgresEngine` on a real server: what SQLite's give."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from pg_server import require

from broker import Namespace
from sources.storage._engine_corpora import Edge, NodeRecord, TaskRecord, TurnRecord
from sources.storage._postgres._engine import PostgresEngine

if TYPE_CHECKING:
    from collections.abc import Iterator

require("psycopg")

ALICE = Namespace(tenant_id="alice")


@pytest.fixture
def engine(pg_url: str) -> Iterator[PostgresEngine]:
    """A PostgresEngine on a fresh database."""
    eng = PostgresEngine.open(pg_url, connections=2)
    yield eng
    eng.close()


def node(i: int) -> NodeRecord:
    return NodeRecord(0, f"n{i}", f"Node {i}", "[]", "", "2026-01-01")


def test_graph_nodes_keys_and_edges(engine: PostgresEngine) -> None:
    """Nodes are found by id and key; an edge is added once; deleting a node drops its edges."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(ALICE)
        a, b, c = (w.graph.insert_node(ns_id, node(i)) for i in range(3))
        w.graph.add_keys(ns_id, a, ["alpha", "first"])
        w.graph.add_keys(ns_id, b, ["alpha"])
        assert w.graph.add_edge(ns_id, Edge(a, "knows", b), "2026")
        assert not w.graph.add_edge(ns_id, Edge(a, "knows", b), "2026")
        assert w.graph.add_edge(ns_id, Edge(b, "likes", c), "2026")
    with engine.read() as r:
        assert r.graph.find(ns_id, "n1") == b
        assert r.graph.keyed(ns_id, ["alpha", "nope"]) == [a, b]
        assert r.graph.edges(ns_id, [b], limit=10) == [Edge(a, "knows", b), Edge(b, "likes", c)]
        assert r.graph.edges(ns_id, [b], limit=1) == [Edge(a, "knows", b)]
    with engine.write() as w:
        w.graph.update_node(ns_id, a, name="A", aliases='["a"]', description="d")
        w.graph.delete_node(ns_id, b)
        assert not w.graph.remove_edge(ns_id, Edge(a, "knows", b))
    with engine.read() as r:
        assert r.graph.keyed(ns_id, ["alpha"]) == []
        assert r.graph.edges(ns_id, [a, c], limit=10) == []
        assert [(n.id, n.name, n.aliases) for n in r.graph.nodes(ns_id, [a, b])] == [("n0", "A", '["a"]')]


def test_tasks_and_their_turns(engine: PostgresEngine) -> None:
    """A task's turns come back in order, filtered by role; completed tasks newest first."""
    with engine.write() as w:
        ns_id = w.ensure_namespace(ALICE)
        for i in range(3):
            w.tasks.create(ns_id, TaskRecord(f"t{i}", f"task {i}", "active", "2026-01-01", "2026-01-01"))
        w.tasks.append_turn(ns_id, TurnRecord("t0", "user", "hello", "2026-01-03"))
        w.tasks.append_turn(ns_id, TurnRecord("t0", "assistant", "hi", "2026-01-04"))
        assert w.tasks.set_status(ns_id, "t0", status="completed", at="2026-01-05")
        assert w.tasks.set_status(ns_id, "t1", status="completed", at="2026-01-06")
        assert not w.tasks.set_status(ns_id, "nope", status="completed", at="2026-01-06")
    with engine.read() as r:
        assert [t.text for t in r.tasks.turns(ns_id, "t0")] == ["hello", "hi"]
        assert [t.text for t in r.tasks.turns(ns_id, "t0", role="user")] == ["hello"]
        assert [t.task_id for t in r.tasks.completed(ns_id, limit=5)] == ["t1", "t0"]
    with engine.write() as w:
        assert w.tasks.delete(ns_id, "t0")
        assert not w.tasks.delete(ns_id, "t0")
    with engine.read() as r:
        assert (r.tasks.get(ns_id, "t0"), r.tasks.turns(ns_id, "t0")) == (None, [])
        assert r.tasks.get(ns_id, "t2") == TaskRecord("t2", "task 2", "active", "2026-01-01", "2026-01-01")
