"""Memorule writes (create, update, delete), each with its audit event in one transaction.

The entry row, its vector, its new `memorule_states` row and its `memorule_audit` event are
written in ONE transaction: no write without its event, no event without its write. The event
is also logged (`memorule.audit`) after the commit. The entry's `metadata` mirrors the current
state's memorule_kind, applies_to, confidence and evidence_signal_id, so a memorule recalled as
plain memory still carries them. A delete removes the row and its states; the audit events
stay, and are the durable record. Every write names its `WriterSession`: one without is
refused. A memorule is created through `sources.remember`, the one write front.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Unpack

from broker import FieldError, Namespace
from broker.log import get_logger
from sources import _index, _schema, _validate, _vectors
from sources._entries import EntryRow, delete_entry_rowid
from sources._store import MemoryStore
from sources._vectors import Slot

from ._checks import combined_errors, field_errors, session_errors
from ._state import Current, current, current_or_raise
from ._values import (
    AuditEvent,
    MemoruleChanges,
    MemoruleFields,
    MemoruleState,
    NewMemorule,
    Stamp,
    WriterSession,
)

if TYPE_CHECKING:
    import sqlite3

logger = get_logger(__name__)


def create_memorule(store: MemoryStore, namespace: Namespace, new: NewMemorule) -> str:
    """Write a validated memorule (`remember` validates it) with its first state; its id."""
    stamp = Stamp(session=new.session)
    row = EntryRow(
        id=new.id or str(uuid.uuid4()),
        kind="memorule",
        memory_type=new.memory_type,
        text=new.fields.text,
        created_at=stamp.at,
        importance=float(new.importance),
        metadata=new.fields.metadata_json(),
    )
    vector = _embed(store, row.text)
    with store.db.write() as conn:
        ns_id = _index.ensure_ns(conn, namespace)
        rowid = store.insert_row(conn, ns_id, namespace, row, replace=False)
        _store_vector(store, conn, ns_id, rowid, vector)
        _append_state(conn, rowid, new.fields, stamp)
        event = _append_audit(
            conn, AuditEvent.of(namespace, row.id, "create", stamp, new.fields.evidence_signal_id)
        )
    _emit(event)
    return row.id


def update_memorule(
    store: MemoryStore,
    id: str,  # noqa: A002
    *,
    namespace: Namespace,
    session: WriterSession | None = None,
    **changes: Unpack[MemoruleChanges],
) -> MemoruleState:
    """Append a new state to a memorule and return it.

    The fields given (`memorule_kind`, `subject`, `body`, `applies_to`, `evidence_signal_id`,
    `confidence`) replace the current ones; None keeps them. ValidationError (every field
    error at once) if a field is invalid or the id is unknown.
    """
    changed: dict[str, Any] = {k: v for k, v in changes.items() if v is not None}
    _validate.raise_if(_update_errors(id, session, changes, changed))
    embedded = _embed_changed_text(store, namespace, id, changed)
    with store.db.write() as conn:
        found = current_or_raise(conn, namespace, id, repairing="applies_to" in changed)
        fields = found.fields.changed(changed)
        _validate.raise_if(combined_errors(fields.subject, fields.body))
        stamp = Stamp(session=session)  # inside the lock: written_at follows the commit order
        _rewrite_entry(store, conn, found, fields, embedded)
        _append_state(conn, found.rowid, fields, stamp)
        event = _append_audit(conn, AuditEvent.of(namespace, id, "update", stamp, fields.evidence_signal_id))
    _emit(event)
    return MemoruleState.of(found.id, found.namespace, fields, stamp, version=found.version + 1)


def _update_errors(
    id: str,  # noqa: A002
    session: object,
    changes: Mapping[str, object],
    changed: Mapping[str, object],
) -> list[FieldError]:
    _validate.check_keywords("update_memorule", changes, _FIELD_ORDER)
    errors = _validate.id_errors("id", id) + session_errors(session)
    for field in sorted(changed, key=_FIELD_ORDER.index):
        errors += field_errors(field, changed[field])
    if not changed:
        errors.append(FieldError(field="update", code="empty", message="give at least one field to change"))
    return errors


_FIELD_ORDER = ("memorule_kind", "subject", "body", "applies_to", "evidence_signal_id", "confidence")
"""`update_memorule`'s fields, in the order their errors are reported."""


def delete_memorule(
    store: MemoryStore,
    id: str,  # noqa: A002
    *,
    namespace: Namespace,
    session: WriterSession | None = None,
    evidence_signal_id: str | None = None,
) -> bool:
    """Remove a memorule and its states (its audit events stay); returns whether it existed."""
    errors = _validate.id_errors("id", id) + session_errors(session)
    errors += _validate.id_errors("evidence_signal_id", evidence_signal_id)
    _validate.raise_if(errors)
    with store.db.write() as conn:
        found = current(conn, namespace, id, repairing=True)
        if found is None:
            return False
        delete_entry_rowid(conn, found.ns_id, found.rowid)
        event = _append_audit(
            conn, AuditEvent.of(namespace, id, "delete", Stamp(session=session), evidence_signal_id)
        )
    _emit(event)
    return True


def _embed_changed_text(
    store: MemoryStore,
    namespace: Namespace,
    id: str,  # noqa: A002
    changed: Mapping[str, Any],
) -> tuple[str, Any] | None:
    """Embed an update's new text before the write lock, as the store does: (text, vector)."""
    if store.embedder is None or not {"subject", "body"} & set(changed):
        return None
    with store.db.read() as conn:
        before = current(conn, namespace, id, repairing=True)
    if before is None:
        return None
    text = before.fields.changed(changed).text
    return None if text == before.text else (text, _embed(store, text))


def _rewrite_entry(
    store: MemoryStore,
    conn: sqlite3.Connection,
    found: Current,
    fields: MemoruleFields,
    embedded: tuple[str, Any] | None,
) -> None:
    """Point the entry row at the new state: metadata, and text, index and vector if changed.

    The vector embedded before the lock is used if the text is still the one embedded (a
    concurrent update may have changed it: then it is embedded here).
    """
    if fields.text != found.text:
        _index.remove_doc(conn, found.ns_id, _schema.CORPUS_ENTRIES, found.rowid)
        _index.add_doc(conn, found.ns_id, _schema.CORPUS_ENTRIES, found.rowid, fields.text)
        _vectors.delete_vectors(conn, _schema.CORPUS_ENTRIES, [found.rowid])
        vector = (
            embedded[1] if embedded is not None and embedded[0] == fields.text else _embed(store, fields.text)
        )
        _store_vector(store, conn, found.ns_id, found.rowid, vector)
    conn.execute(
        "UPDATE entries SET text = ?, metadata = ? WHERE rowid = ? AND ns_id = ?",
        (fields.text, fields.metadata_json(), found.rowid, found.ns_id),
    )


# Vectors: a store with an embedder keeps one vector per entry (dense and hybrid recall), so
# a memorule's vector is written (or replaced) in the same transaction as its text.


def _embed(store: MemoryStore, text: str) -> Any:  # noqa: ANN401 - numpy array or None
    return None if store.embedder is None else store.embedder.embed([text])


def _store_vector(store: MemoryStore, conn: sqlite3.Connection, ns_id: int, rowid: int, vector: Any) -> None:  # noqa: ANN401
    if vector is not None and store.embedder is not None:
        _vectors.store_vectors(
            conn, Slot(ns_id, _schema.CORPUS_ENTRIES), [rowid], vector, store.embedder.model_id
        )


def _append_state(conn: sqlite3.Connection, rowid: int, fields: MemoruleFields, stamp: Stamp) -> None:
    conn.execute(
        "INSERT INTO memorule_states (entry_rowid, memorule_kind, subject, body, applies_to, "
        "evidence_signal_id, confidence, written_by_session_id, written_by_persona, written_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            rowid,
            fields.memorule_kind,
            fields.subject,
            fields.body,
            fields.applies_json(),
            fields.evidence_signal_id,
            fields.confidence,
            stamp.session_id,
            stamp.persona,
            stamp.at,
        ),
    )


def _append_audit(conn: sqlite3.Connection, event: AuditEvent) -> AuditEvent:
    conn.execute(
        "INSERT INTO memorule_audit (tenant_id, project_id, memorule_id, action, written_by_session_id, "
        "written_by_persona, evidence_signal_id, written_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event.tenant_id,
            event.project_id,
            event.memorule_id,
            event.action,
            event.written_by_session_id,
            event.written_by_persona,
            event.evidence_signal_id,
            event.written_at,
        ),
    )
    return event


def _emit(event: AuditEvent) -> None:
    logger.info("memorule.audit", **event.as_dict())
