"""Memorules in PostgreSQL: their states and audit events (`sources.storage._engine_corpora`).

A memorule's state and its audit event are written in the caller's one transaction (the
engine's `write`), so a writer killed between the two leaves neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from sources.storage._engine import CORPUS_ENTRIES, bm25_rank
from sources.storage._engine_corpora import AuditRecord, CurrentRecord, StateRecord

from . import _index

if TYPE_CHECKING:
    from collections.abc import Sequence

    from broker import Namespace

    from ._sql import Scope

_CURRENT_COLS: Final = (
    "e.rowid, e.id, e.ns_id, e.tenant_id, e.project_id, e.memory_type, e.text, e.created_at, "
    "s.rowid, s.memorule_kind, s.subject, s.body, s.applies_to, s.evidence_signal_id, s.confidence, "
    "s.written_by_session_id, s.written_by_persona, s.written_at, "
    "(SELECT count(*) FROM memorule_states c WHERE c.entry_rowid = e.rowid)"
)
"""An entry `e` joined with its newest state `s`, in `CurrentRecord`'s order."""
_CURRENT_JOIN: Final = (
    " JOIN memorule_states s ON s.rowid = "
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
# Only a valid JSON object has a scope; CASE keeps the cast from reading any other text.
_TENANT_WIDE: Final = (
    " AND CASE WHEN s.applies_to IS JSON OBJECT THEN s.applies_to::jsonb ->> 'scope' END IN ('global', 'org')"
)


@attrs.define(eq=False, slots=True)
class PostgresMemorules:
    """`MemoruleReads` and `MemoruleWrites` over `memorule_states` and `memorule_audit`."""

    scope: Scope

    def current(self, ns_id: int, id: str) -> CurrentRecord | None:  # noqa: A002
        row = self.scope.ns(ns_id).one(
            f"SELECT {_CURRENT_COLS} FROM entries e{_CURRENT_JOIN} "
            "WHERE e.ns_id = %s AND e.id = %s AND e.kind = 'memorule'",
            (ns_id, id),
        )
        return None if row is None else CurrentRecord(*row)

    def history(self, ns_id: int, id: str) -> list[StateRecord]:  # noqa: A002
        rows = self.scope.ns(ns_id).rows(
            f"SELECT {_STATE_COLS} FROM entries e JOIN memorule_states s ON s.entry_rowid = e.rowid "
            "WHERE e.ns_id = %s AND e.id = %s AND e.kind = 'memorule' ORDER BY s.rowid",
            (ns_id, id),
        )
        return [StateRecord(*r) for r in rows]

    def audit(self, *, since: str | None, tenant_id: str | None) -> list[AuditRecord]:
        sql = (
            f"SELECT {_AUDIT_COLS} FROM memorule_audit "
            "WHERE (%s::text IS NULL OR written_at >= %s) ORDER BY rowid"
        )
        if tenant_id is None:
            with self.scope.every_tenant():
                rows = self.scope.rows(sql, (since, since))
        else:
            rows = self.scope.tenant(tenant_id).rows(sql, (since, since))
        return [AuditRecord(*r) for r in rows]

    def count(self, ns_id: int) -> int:
        sql = "SELECT count(*) FROM entries WHERE ns_id = %s AND kind = 'memorule'"
        row = self.scope.ns(ns_id).one(sql, (ns_id,))
        return 0 if row is None else int(row[0])

    def other_namespaces(self, namespace: Namespace) -> list[int]:
        rows = self.scope.tenant(namespace.tenant_id).rows(
            "SELECT n.ns_id FROM namespaces n WHERE n.tenant_id = %s AND n.project_id <> %s "
            "AND EXISTS (SELECT 1 FROM entries e WHERE e.ns_id = n.ns_id AND e.kind = 'memorule') "
            "ORDER BY n.ns_id",
            (namespace.tenant_id, namespace.project_id),
        )
        return [int(r[0]) for r in rows]

    def lexical(
        self, ns_id: int, terms: Sequence[str], *, limit: int, tenant_wide: bool
    ) -> list[CurrentRecord]:
        if not terms or limit <= 0:
            return []
        stats = _index.stats(self.scope, ns_id, terms)
        where = " AND e.kind = 'memorule'" + (_TENANT_WIDE if tenant_wide else "")
        sql = _index.candidates_sql(_CURRENT_COLS, _index.ENTRY_JOIN + _CURRENT_JOIN, where)
        rows = self.scope.rows(
            sql, _index.params(stats, terms, ns_id=ns_id, corpus=CORPUS_ENTRIES, limit=limit)
        )
        found = [(bm25_rank(r[19], terms, stats), int(r[0]), CurrentRecord(*r[:19])) for r in rows]
        found.sort(key=lambda f: (f[0], f[1]))
        return [record for _, _, record in found]

    def among(self, ns_id: int, rowids: Sequence[int]) -> list[CurrentRecord]:
        if not rowids:
            return []
        rows = self.scope.ns(ns_id).rows(
            f"SELECT {_CURRENT_COLS} FROM entries e{_CURRENT_JOIN} "
            "WHERE e.ns_id = %s AND e.kind = 'memorule' AND e.rowid = ANY(%s)",
            (ns_id, [int(r) for r in rowids]),
        )
        found = {int(r[0]): CurrentRecord(*r) for r in rows}
        return [found[r] for r in dict.fromkeys(rowids) if r in found]

    def append_state(self, entry_rowid: int, state: StateRecord) -> None:
        row = self.scope.one("SELECT entry_namespace(%s)", (entry_rowid,))
        if row is None or row[0] is None:
            msg = f"no entry with rowid {entry_rowid}"
            raise ValueError(msg)
        ns_id = int(row[0])
        self.scope.ns(ns_id).execute(
            "INSERT INTO memorule_states (entry_rowid, ns_id, memorule_kind, subject, body, applies_to, "
            "evidence_signal_id, confidence, written_by_session_id, written_by_persona, written_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (entry_rowid, ns_id, *state),
        )

    def append_audit(self, event: AuditRecord) -> None:
        self.scope.tenant(event.tenant_id).execute(
            f"INSERT INTO memorule_audit ({_AUDIT_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            tuple(event),
        )
