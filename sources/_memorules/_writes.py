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
from sources._store import MemoryStore
from sources.storage import _index, _validate
from sources.storage._engine import CORPUS_ENTRIES, Slot
from sources.storage._engine_corpora import AuditRecord, StateRecord
from sources.storage._entries import EntryRow

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
    from sources.storage._engine import Writer

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
    with store.engine.write() as conn:
        ns_id = conn.ensure_namespace(namespace)
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
    with store.engine.write() as conn:
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
    with store.engine.write() as conn:
        found = current(conn, namespace, id, repairing=True)
        if found is None:
            return False
        conn.entries.delete(found.ns_id, found.rowid)
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
    with store.engine.read() as conn:
        before = current(conn, namespace, id, repairing=True)
    if before is None:
        return None
    text = before.fields.changed(changed).text
    return None if text == before.text else (text, _embed(store, text))


def _rewrite_entry(
    store: MemoryStore,
    conn: Writer,
    found: Current,
    fields: MemoruleFields,
    embedded: tuple[str, Any] | None,
) -> None:
    """Point the entry row at the new state: metadata, and text, index and vector if changed.

    The vector embedded before the lock is used if the text is still the one embedded (a
    concurrent update may have changed it: then it is embedded here).
    """
    if fields.text != found.text:
        _index.remove_doc(conn, found.ns_id, CORPUS_ENTRIES, found.rowid)
        _index.add_doc(conn, found.ns_id, CORPUS_ENTRIES, found.rowid, fields.text)
        conn.delete_vectors(CORPUS_ENTRIES, [found.rowid])
        vector = (
            embedded[1] if embedded is not None and embedded[0] == fields.text else _embed(store, fields.text)
        )
        _store_vector(store, conn, found.ns_id, found.rowid, vector)
    conn.entries.update_text(found.ns_id, found.rowid, text=fields.text, metadata=fields.metadata_json())


# Vectors: a store with an embedder keeps one vector per entry (dense and hybrid recall), so
# a memorule's vector is written (or replaced) in the same transaction as its text.


def _embed(store: MemoryStore, text: str) -> Any:  # noqa: ANN401 - numpy array or None
    return None if store.embedder is None else store.embedder.embed([text])


def _store_vector(store: MemoryStore, conn: Writer, ns_id: int, rowid: int, vector: Any) -> None:  # noqa: ANN401
    if vector is not None and store.embedder is not None:
        conn.store_vectors(Slot(ns_id, CORPUS_ENTRIES), [rowid], vector, store.embedder.model_id)


def _append_state(conn: Writer, rowid: int, fields: MemoruleFields, stamp: Stamp) -> None:
    state = StateRecord(
        memorule_kind=fields.memorule_kind,
        subject=fields.subject,
        body=fields.body,
        applies_to=fields.applies_json(),
        evidence_signal_id=fields.evidence_signal_id,
        confidence=fields.confidence,
        written_by_session_id=stamp.session_id,
        written_by_persona=stamp.persona,
        written_at=stamp.at,
    )
    conn.memorules.append_state(rowid, state)


def _append_audit(conn: Writer, event: AuditEvent) -> AuditEvent:
    conn.memorules.append_audit(AuditRecord(**event.as_dict()))
    return event


def _emit(event: AuditEvent) -> None:
    logger.info("memorule.audit", **event.as_dict())
