"""Writes the PostgreSQL tests share, importable by a writer subprocess (no test imports)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sources.storage._postgres import Session


def write_memorule(s: Session, project: str = "p") -> None:
    """A namespace, a memorule's entry and its state: what a memorule write starts with."""
    row = s.execute("INSERT INTO namespaces (project_id) VALUES (%s) RETURNING ns_id", (project,)).fetchone()
    assert row is not None
    entry = s.execute(
        "INSERT INTO entries (id, ns_id, project_id, kind, text, created_at, importance) "
        "VALUES ('m1', %s, %s, 'memorule', 'use tabs', '2026-01-01', 0.5) RETURNING rowid",
        (row[0], project),
    ).fetchone()
    assert entry is not None
    s.execute(
        "INSERT INTO memorule_states (entry_rowid, ns_id, memorule_kind, subject, body, applies_to, "
        "confidence, written_at) VALUES (%s, %s, 'rule', 's', 'b', '{}', 'high', '2026-01-01')",
        (entry[0], row[0]),
    )


def write_audit(s: Session, project: str = "p") -> None:
    """The memorule's audit event: what a memorule write ends with."""
    s.execute(
        "INSERT INTO memorule_audit (project_id, memorule_id, action, written_at) "
        "VALUES (%s, 'm1', 'create', '2026-01-01')",
        (project,),
    )
