"""The entity graph and the tasks in PostgreSQL (`sources.storage._engine_corpora`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from sources.storage._engine_corpora import Edge, NodeRecord, TaskRecord, TurnRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._sql import Scope

_NODE_COLS: Final = "rowid, id, name, aliases, description, created_at"
_TASK_COLS: Final = "task_id, description, status, created_at, updated_at"
_CHUNK: Final = 500  # node rowids per edge query: the protocol's limit is per 500 rowids


@attrs.define(eq=False, slots=True)
class PostgresGraph:
    """`GraphReads` and `GraphWrites` over `graph_nodes`, `graph_keys` and `graph_edges`."""

    scope: Scope

    def find(self, ns_id: int, id: str) -> int | None:  # noqa: A002
        row = self.scope.ns(ns_id).one(
            "SELECT rowid FROM graph_nodes WHERE ns_id = %s AND id = %s", (ns_id, id)
        )
        return None if row is None else int(row[0])

    def nodes(self, ns_id: int, rowids: Sequence[int]) -> list[NodeRecord]:
        sql = f"SELECT {_NODE_COLS} FROM graph_nodes WHERE ns_id = %s AND rowid = ANY(%s)"
        return [NodeRecord(*r) for r in self.scope.ns(ns_id).rows(sql, (ns_id, [int(r) for r in rowids]))]

    def keyed(self, ns_id: int, keys: Sequence[str]) -> list[int]:
        sql = "SELECT DISTINCT node_rowid FROM graph_keys WHERE ns_id = %s AND key = ANY(%s) ORDER BY 1"
        return [int(r[0]) for r in self.scope.ns(ns_id).rows(sql, (ns_id, list(keys)))]

    def edges(self, ns_id: int, rowids: Sequence[int], *, limit: int) -> list[Edge]:
        out: list[Edge] = []
        self.scope.ns(ns_id)
        for start in range(0, len(rowids), _CHUNK):
            part = [int(r) for r in rowids[start : start + _CHUNK]]
            out += [
                Edge(int(r[0]), str(r[1]), int(r[2]))
                for r in self.scope.rows(
                    "SELECT src_rowid, relation, dst_rowid FROM graph_edges "
                    "WHERE ns_id = %s AND (src_rowid = ANY(%s) OR dst_rowid = ANY(%s)) "
                    "ORDER BY rowid LIMIT %s",
                    (ns_id, part, part, limit),
                )
            ]
        return out

    def insert_node(self, ns_id: int, node: NodeRecord) -> int:
        row = self.scope.ns(ns_id).one(
            "INSERT INTO graph_nodes (id, ns_id, name, aliases, description, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s) RETURNING rowid",
            (node.id, ns_id, node.name, node.aliases, node.description, node.created_at),
        )
        assert row is not None  # noqa: S101 - INSERT ... RETURNING returns its row
        return int(row[0])

    def update_node(self, ns_id: int, rowid: int, *, name: str, aliases: str, description: str) -> None:
        self.scope.ns(ns_id).execute(
            "UPDATE graph_nodes SET name = %s, aliases = %s, description = %s "
            "WHERE rowid = %s AND ns_id = %s",
            (name, aliases, description, rowid, ns_id),
        )
        self.scope.execute("DELETE FROM graph_keys WHERE ns_id = %s AND node_rowid = %s", (ns_id, rowid))

    def add_keys(self, ns_id: int, rowid: int, keys: Sequence[str]) -> None:
        self.scope.ns(ns_id).execute(
            "INSERT INTO graph_keys (ns_id, key, node_rowid) SELECT %s, k, %s FROM unnest(%s::text[]) k "
            "ON CONFLICT DO NOTHING",
            (ns_id, rowid, list(keys)),
        )

    def add_edge(self, ns_id: int, edge: Edge, created_at: str) -> bool:
        cur = self.scope.ns(ns_id).execute(
            "INSERT INTO graph_edges (ns_id, src_rowid, dst_rowid, relation, created_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (ns_id, edge.src, edge.dst, edge.relation, created_at),
        )
        return bool(cur.rowcount > 0)

    def remove_edge(self, ns_id: int, edge: Edge) -> bool:
        cur = self.scope.ns(ns_id).execute(
            "DELETE FROM graph_edges "
            "WHERE ns_id = %s AND src_rowid = %s AND dst_rowid = %s AND relation = %s",
            (ns_id, edge.src, edge.dst, edge.relation),
        )
        return bool(cur.rowcount > 0)

    def delete_node(self, ns_id: int, rowid: int) -> None:
        self.scope.ns(ns_id).execute(
            "DELETE FROM graph_keys WHERE ns_id = %s AND node_rowid = %s", (ns_id, rowid)
        )
        self.scope.execute(
            "DELETE FROM graph_edges WHERE ns_id = %s AND (src_rowid = %s OR dst_rowid = %s)",
            (ns_id, rowid, rowid),
        )
        self.scope.execute("DELETE FROM graph_nodes WHERE ns_id = %s AND rowid = %s", (ns_id, rowid))


@attrs.define(eq=False, slots=True)
class PostgresTasks:
    """`TaskReads` and `TaskWrites` over `tasks` and `conversation_turns`."""

    scope: Scope

    def get(self, ns_id: int, task_id: str) -> TaskRecord | None:
        row = self.scope.ns(ns_id).one(
            f"SELECT {_TASK_COLS} FROM tasks WHERE ns_id = %s AND task_id = %s", (ns_id, task_id)
        )
        return None if row is None else TaskRecord(*row)

    def completed(self, ns_id: int, *, limit: int) -> list[TaskRecord]:
        rows = self.scope.ns(ns_id).rows(
            f"SELECT {_TASK_COLS} FROM tasks WHERE ns_id = %s AND status = 'completed' "
            "ORDER BY updated_at DESC, task_id LIMIT %s",
            (ns_id, limit),
        )
        return [TaskRecord(*r) for r in rows]

    def turns(self, ns_id: int, task_id: str, *, role: str | None = None) -> list[TurnRecord]:
        rows = self.scope.ns(ns_id).rows(
            "SELECT task_id, role, text, created_at FROM conversation_turns "
            "WHERE ns_id = %s AND task_id = %s AND (%s::text IS NULL OR role = %s) ORDER BY rowid",
            (ns_id, task_id, role, role),
        )
        return [TurnRecord(*r) for r in rows]

    def create(self, ns_id: int, task: TaskRecord) -> None:
        self.scope.ns(ns_id).execute(
            "INSERT INTO tasks (ns_id, task_id, description, status, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (ns_id, *task),
        )

    def set_status(self, ns_id: int, task_id: str, *, status: str, at: str) -> bool:
        cur = self.scope.ns(ns_id).execute(
            "UPDATE tasks SET status = %s, updated_at = %s WHERE ns_id = %s AND task_id = %s",
            (status, at, ns_id, task_id),
        )
        return bool(cur.rowcount > 0)

    def append_turn(self, ns_id: int, turn: TurnRecord) -> None:
        self.scope.ns(ns_id).execute(
            "INSERT INTO conversation_turns (ns_id, task_id, role, text, created_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            (ns_id, *turn),
        )
        self.scope.execute(
            "UPDATE tasks SET updated_at = %s WHERE ns_id = %s AND task_id = %s",
            (turn.created_at, ns_id, turn.task_id),
        )

    def delete(self, ns_id: int, task_id: str) -> bool:
        self.scope.ns(ns_id).execute(
            "DELETE FROM conversation_turns WHERE ns_id = %s AND task_id = %s", (ns_id, task_id)
        )
        cur = self.scope.execute("DELETE FROM tasks WHERE ns_id = %s AND task_id = %s", (ns_id, task_id))
        return bool(cur.rowcount > 0)
