"""The entity graph and the tasks in SQLite (`sources.storage._engine_corpora`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from sources.storage._engine_corpora import Edge, NodeRecord, TaskRecord, TurnRecord

from ._sql import marks, select_in

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

_NODE_COLS = "rowid, id, name, aliases, description, created_at"
_TASK_COLS = "task_id, description, status, created_at, updated_at"
_CHUNK = 500  # node rowids per edge query


@attrs.define(eq=False, slots=True)
class SqliteGraph:
    """`GraphReads` and `GraphWrites` over `graph_nodes`, `graph_keys` and `graph_edges`."""

    conn: sqlite3.Connection

    def find(self, ns_id: int, id: str) -> int | None:  # noqa: A002
        row = self.conn.execute(
            "SELECT rowid FROM graph_nodes WHERE ns_id = ? AND id = ?", (ns_id, id)
        ).fetchone()
        return None if row is None else int(row[0])

    def nodes(self, ns_id: int, rowids: Sequence[int]) -> list[NodeRecord]:
        sql = f"SELECT {_NODE_COLS} FROM graph_nodes WHERE ns_id = ? AND rowid IN ({{marks}})"
        return [NodeRecord(*r) for r in select_in(self.conn, sql, list(rowids), (ns_id,))]

    def keyed(self, ns_id: int, keys: Sequence[str]) -> list[int]:
        sql = "SELECT DISTINCT node_rowid FROM graph_keys WHERE ns_id = ? AND key IN ({marks})"
        return sorted({int(r[0]) for r in select_in(self.conn, sql, list(keys), (ns_id,))})

    def edges(self, ns_id: int, rowids: Sequence[int], *, limit: int) -> list[Edge]:
        out: list[Edge] = []
        for start in range(0, len(rowids), _CHUNK):
            part = list(rowids[start : start + _CHUNK])
            m = marks(len(part))
            out += [
                Edge(int(r[0]), str(r[1]), int(r[2]))
                for r in self.conn.execute(
                    "SELECT src_rowid, relation, dst_rowid FROM graph_edges "
                    f"WHERE ns_id = ? AND (src_rowid IN ({m}) OR dst_rowid IN ({m})) ORDER BY rowid LIMIT ?",
                    [ns_id, *part, *part, limit],
                )
            ]
        return out

    def insert_node(self, ns_id: int, node: NodeRecord) -> int:
        cur = self.conn.execute(
            "INSERT INTO graph_nodes (id, ns_id, name, aliases, description, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (node.id, ns_id, node.name, node.aliases, node.description, node.created_at),
        )
        return int(cur.lastrowid or 0)

    def update_node(self, ns_id: int, rowid: int, *, name: str, aliases: str, description: str) -> None:
        self.conn.execute(
            "UPDATE graph_nodes SET name = ?, aliases = ?, description = ? WHERE rowid = ? AND ns_id = ?",
            (name, aliases, description, rowid, ns_id),
        )
        self.conn.execute("DELETE FROM graph_keys WHERE ns_id = ? AND node_rowid = ?", (ns_id, rowid))

    def add_keys(self, ns_id: int, rowid: int, keys: Sequence[str]) -> None:
        self.conn.executemany(
            "INSERT INTO graph_keys (ns_id, key, node_rowid) VALUES (?, ?, ?)",
            [(ns_id, k, rowid) for k in keys],
        )

    def add_edge(self, ns_id: int, edge: Edge, created_at: str) -> bool:
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO graph_edges (ns_id, src_rowid, dst_rowid, relation, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (ns_id, edge.src, edge.dst, edge.relation, created_at),
        )
        return cur.rowcount > 0

    def remove_edge(self, ns_id: int, edge: Edge) -> bool:
        cur = self.conn.execute(
            "DELETE FROM graph_edges WHERE ns_id = ? AND src_rowid = ? AND dst_rowid = ? AND relation = ?",
            (ns_id, edge.src, edge.dst, edge.relation),
        )
        return cur.rowcount > 0

    def delete_node(self, ns_id: int, rowid: int) -> None:
        self.conn.execute("DELETE FROM graph_keys WHERE ns_id = ? AND node_rowid = ?", (ns_id, rowid))
        self.conn.execute(
            "DELETE FROM graph_edges WHERE ns_id = ? AND (src_rowid = ? OR dst_rowid = ?)",
            (ns_id, rowid, rowid),
        )
        self.conn.execute("DELETE FROM graph_nodes WHERE ns_id = ? AND rowid = ?", (ns_id, rowid))


@attrs.define(eq=False, slots=True)
class SqliteTasks:
    """`TaskReads` and `TaskWrites` over `tasks` and `conversation_turns`."""

    conn: sqlite3.Connection

    def get(self, ns_id: int, task_id: str) -> TaskRecord | None:
        row = self.conn.execute(
            f"SELECT {_TASK_COLS} FROM tasks WHERE ns_id = ? AND task_id = ?", (ns_id, task_id)
        ).fetchone()
        return None if row is None else TaskRecord(*row)

    def completed(self, ns_id: int, *, limit: int) -> list[TaskRecord]:
        rows = self.conn.execute(
            f"SELECT {_TASK_COLS} FROM tasks WHERE ns_id = ? AND status = 'completed' "
            "ORDER BY updated_at DESC, task_id LIMIT ?",
            (ns_id, limit),
        ).fetchall()
        return [TaskRecord(*r) for r in rows]

    def turns(self, ns_id: int, task_id: str, *, role: str | None = None) -> list[TurnRecord]:
        sql = "SELECT task_id, role, text, created_at FROM conversation_turns WHERE ns_id = ? AND task_id = ?"
        params: list[str | int] = [ns_id, task_id]
        if role is not None:
            sql, params = sql + " AND role = ?", [*params, role]
        return [TurnRecord(*r) for r in self.conn.execute(sql + " ORDER BY rowid", params)]

    def create(self, ns_id: int, task: TaskRecord) -> None:
        self.conn.execute(
            "INSERT INTO tasks (ns_id, task_id, description, status, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (ns_id, *task),
        )

    def set_status(self, ns_id: int, task_id: str, *, status: str, at: str) -> bool:
        cur = self.conn.execute(
            "UPDATE tasks SET status = ?, updated_at = ? WHERE ns_id = ? AND task_id = ?",
            (status, at, ns_id, task_id),
        )
        return cur.rowcount > 0

    def append_turn(self, ns_id: int, turn: TurnRecord) -> None:
        self.conn.execute(
            "INSERT INTO conversation_turns (ns_id, task_id, role, text, created_at) VALUES (?, ?, ?, ?, ?)",
            (ns_id, *turn),
        )
        self.conn.execute(
            "UPDATE tasks SET updated_at = ? WHERE ns_id = ? AND task_id = ?",
            (turn.created_at, ns_id, turn.task_id),
        )

    def delete(self, ns_id: int, task_id: str) -> bool:
        if self.get(ns_id, task_id) is None:
            return False
        self.conn.execute("DELETE FROM conversation_turns WHERE ns_id = ? AND task_id = ?", (ns_id, task_id))
        self.conn.execute("DELETE FROM tasks WHERE ns_id = ? AND task_id = ?", (ns_id, task_id))
        return True
