"""Memorules in SQLite: their states and audit events (`sources.storage._engine_corpora`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from sources.storage._engine_corpora import AuditRecord, CurrentRecord, StateRecord

from . import _schema
from ._sql import fts_match, fts_terms, select_in

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from broker import Namespace

_CURRENT_COLS: Final = (
    "e.rowid, e.id, e.ns_id, e.tenant_id, e.project_id, e.memory_type, e.text, e.created_at, "
    "s.rowid, s.memorule_kind, s.subject, s.body, s.applies_to, s.evidence_signal_id, s.confidence, "
    "s.written_by_session_id, s.written_by_persona, s.written_at, "
    "(SELECT count(*) FROM memorule_states c WHERE c.entry_rowid = e.rowid)"
)
"""An entry `e` joined with its newest state `s`, in `CurrentRecord`'s order."""
_CURRENT_JOIN: Final = (
    "JOIN memorule_states s ON s.rowid = "
    "(SELECT max(m.rowid) FROM memorule_states m WHERE m.entry_rowid = e.rowid)"
)
_STATE_COLS: Final = (
    "s.memorule_kind, s.subject, s.body, s.applies_to, s.evidence_signal_id, s.confidence, "
    "s.written_by_session_id, s.written_by_persona, s.written_at"
)
_AUDIT_COLS: Final = (
    "memorule_id, action, written_by_session_id, written_by_persona, evidence_signal_id, "
    "written_at, tenant_id, project_id"
)
# json_extract raises on a damaged applies_to; CASE only reads the valid ones.
_TENANT_WIDE: Final = (
    " AND CASE WHEN json_valid(s.applies_to) THEN json_extract(s.applies_to, '$.scope') END"
    " IN ('global', 'org')"
)


@attrs.define(eq=False, slots=True)
class SqliteMemorules:
    """`MemoruleReads` and `MemoruleWrites` over `memorule_states` and `memorule_audit`."""

    conn: sqlite3.Connection

    def current(self, ns_id: int, id: str) -> CurrentRecord | None:  # noqa: A002
        row = self.conn.execute(
            f"SELECT {_CURRENT_COLS} FROM entries e {_CURRENT_JOIN} "
            "WHERE e.ns_id = ? AND e.id = ? AND e.kind = 'memorule'",
            (ns_id, id),
        ).fetchone()
        return None if row is None else CurrentRecord(*row)

    def history(self, ns_id: int, id: str) -> list[StateRecord]:  # noqa: A002
        rows = self.conn.execute(
            f"SELECT {_STATE_COLS} FROM entries e JOIN memorule_states s ON s.entry_rowid = e.rowid "
            "WHERE e.ns_id = ? AND e.id = ? AND e.kind = 'memorule' ORDER BY s.rowid",
            (ns_id, id),
        ).fetchall()
        return [StateRecord(*r) for r in rows]

    def audit(self, *, since: str | None, tenant_id: str | None) -> list[AuditRecord]:
        where, params = [], []
        if since is not None:
            where.append("written_at >= ?")
            params.append(since)
        if tenant_id is not None:
            where.append("tenant_id = ?")
            params.append(tenant_id)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self.conn.execute(f"SELECT {_AUDIT_COLS} FROM memorule_audit{clause} ORDER BY rowid", params)
        return [AuditRecord(*r) for r in rows]

    def count(self, ns_id: int) -> int:
        sql = "SELECT count(*) FROM entries WHERE ns_id = ? AND kind = 'memorule'"
        return int(self.conn.execute(sql, (ns_id,)).fetchone()[0])

    def other_namespaces(self, namespace: Namespace) -> list[int]:
        rows = self.conn.execute(
            "SELECT n.ns_id FROM namespaces n WHERE n.tenant_id = ? AND n.project_id != ? "
            "AND EXISTS (SELECT 1 FROM entries e WHERE e.ns_id = n.ns_id AND e.kind = 'memorule') "
            "ORDER BY n.ns_id",
            (namespace.tenant_id, namespace.project_id),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def lexical(
        self, ns_id: int, terms: Sequence[str], *, limit: int, tenant_wide: bool
    ) -> list[CurrentRecord]:
        terms = fts_terms(terms)
        if not terms:
            return []
        table = _schema.fts_table(ns_id)
        rows = self.conn.execute(
            f"SELECT {_CURRENT_COLS} FROM {table} JOIN entries e ON e.rowid = ({table}.rowid >> 2) "
            f"{_CURRENT_JOIN} WHERE {table} MATCH ? AND ({table}.rowid & 3) = 0 "
            f"AND e.kind = 'memorule'{_TENANT_WIDE if tenant_wide else ''} "
            f"ORDER BY bm25({table}), {table}.rowid LIMIT ?",
            (fts_match(terms), limit),
        ).fetchall()
        return [CurrentRecord(*r) for r in rows]

    def among(self, ns_id: int, rowids: Sequence[int]) -> list[CurrentRecord]:
        sql = (
            f"SELECT {_CURRENT_COLS} FROM entries e {_CURRENT_JOIN} "
            "WHERE e.ns_id = ? AND e.kind = 'memorule' AND e.rowid IN ({marks})"
        )
        found = {int(r[0]): CurrentRecord(*r) for r in select_in(self.conn, sql, list(rowids), (ns_id,))}
        return [found[r] for r in dict.fromkeys(rowids) if r in found]

    def append_state(self, entry_rowid: int, state: StateRecord) -> None:
        self.conn.execute(
            "INSERT INTO memorule_states (entry_rowid, memorule_kind, subject, body, applies_to, "
            "evidence_signal_id, confidence, written_by_session_id, written_by_persona, written_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (entry_rowid, *state),
        )

    def append_audit(self, event: AuditRecord) -> None:
        self.conn.execute(
            f"INSERT INTO memorule_audit ({_AUDIT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            tuple(event),
        )
