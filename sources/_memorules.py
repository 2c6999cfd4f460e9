"""Memorules: typed behavioural records with audited writes and context-ranked recall.

A memorule is a rule, feedback, preference, correction or convention: validated on write,
written with an audit event in the same transaction, versioned, and recalled ranked by how
well it fits the session asking.

Storage. A memorule is an `entries` row of kind "memorule" whose text is its subject and
body, so it is indexed in its namespace's FTS like any memory and scored on the one
calibrated scale; its fields live in versioned `memorule_states` rows (the newest is current,
the older ones are its history) and every write appends a `memorule_audit` event. The row,
its state and its event are written in ONE transaction: no write without its event, no event
without its write. The event is also logged (`memorule.audit`) after the commit. The entry's
`metadata` mirrors the current state's memorule_kind, applies_to, confidence and
evidence_signal_id, so a memorule recalled as plain memory still carries them. A delete removes
the row and its states; the audit events stay, and are the durable record.

Visibility. Memorules never cross tenants. One whose `applies_to.scope` is `global` or `org`
applies to every project of its tenant; any other (scope `project`, `persona`, or no scope)
applies only to the project it was written in. Updates, deletes and history address the
project a memorule was written in.

Matching a session. `applies_to` ranks; it excludes only on contradiction. A rule is left
out when a key it sets contradicts the session: `persona`, `surface` or `specialization`
set to another value than the session's, or a `scope` the session's level does not see.
`scope` is a level, not an identity: global > org > project > persona, and a rule applies at
its own level and every narrower one — a context at scope `project` sees global, org and
project rules; at `persona` it sees all four; at `global` only global ones. A key the session
does not state contradicts nothing: the rule is kept, and that key counts as no overlap, so
it ranks below rules whose keys the session matches.

Ranking. Qualified memorules (calibrated relevance at or above the floor, and not
contradicting the context) rank by overlap x confidence weight — overlap is how many keys of
`applies_to` matched a key the context sets, the weights are `CONFIDENCE_WEIGHTS` (observed 3,
inferred 2, asserted 1) — then by the confidence weight alone (so with an empty session
context, or equal products, observed still ranks above inferred above asserted), then by
`written_at`, newer first, then by relevance, then by id. The source hands this order to the
turn as `Candidate.rank`: the selector caps, admission drops and the context renders
memorules in it; the floor applies to the relevance alone.

Writers. Every write (create, update, delete) names its `WriterSession` (session id and
persona), recorded in the state and the audit event: a write without one is refused.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs

from broker import (
    MEMORY_TYPES,
    RECALL_MIN_SCORE,
    Candidate,
    ConfigError,
    FieldError,
    Namespace,
    SessionContext,
    ValidationError,
    hidden_character,
)
from broker.log import get_logger

from . import _analysis, _index, _results, _schema, _validate, _vectors
from ._relevance import DENSE_MODES, QueryProfile, check_mode
from ._source_base import QueryCache, ReaderSource
from ._store import MemoryStore, NewEntry, Recalled, _checked, _Row, delete_entry_rowid, types_errors

if TYPE_CHECKING:
    import sqlite3

    from broker.abc import Embedder, SourceRequest

    from ._scorer import Relevance

logger = get_logger(__name__)

MEMORULE_KINDS: Final[tuple[str, ...]] = (
    "behavioral_rule",
    "feedback",
    "preference",
    "correction",
    "convention",
)
"""What a memorule records: a rule, feedback on an action, a preference, a correction of a
mistake, or a convention to respect."""
CONFIDENCE_LEVELS: Final[tuple[str, ...]] = ("observed", "inferred", "asserted")
"""How the writer knows: witnessed, derived from a pattern, or claimed."""
CONFIDENCE_WEIGHTS: Final[Mapping[str, int]] = {"observed": 3, "inferred": 2, "asserted": 1}
"""Ranking weight of each confidence level (multiplies the applies_to overlap)."""
DEFAULT_CONFIDENCE: Final = "inferred"
SCOPES: Final[tuple[str, ...]] = ("global", "org", "project", "persona")
"""Levels a memorule applies at, broadest first."""
APPLIES_TO_KEYS: Final[tuple[str, ...]] = ("persona", "surface", "specialization", "scope")
SOURCE_TYPES: Final[tuple[str, ...]] = ("memory", "memorule")
AUDIT_ACTIONS: Final[tuple[str, ...]] = ("create", "update", "delete")
MIN_SUBJECT_CHARS: Final = 4
MIN_BODY_CHARS: Final = 10
MAX_KEY_CHARS: Final = 200
MAX_TOP_K: Final = 1000

_TENANT_WIDE: Final = ("global", "org")
_BREADTH: Final[Mapping[str, int]] = {"persona": 0, "project": 1, "org": 2, "global": 3}
_DEPTH_MIN: Final = 200  # FTS hits scored per namespace, at least: ranking is not by score
_MEMORULE_ONLY: Final = ("memorule_kind", "subject", "body", "applies_to", "evidence_signal_id", "confidence")


# -- values ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class WriterSession:
    """The session writing a memorule: its id and persona, recorded in state and audit."""

    session_id: str
    persona: str


@attrs.frozen(kw_only=True)
class MemoruleState:
    """One version of a memorule (the newest is current)."""

    memorule_id: str
    namespace: Namespace
    version: int
    memorule_kind: str
    subject: str
    body: str
    applies_to: Mapping[str, str]
    confidence: str
    evidence_signal_id: str | None
    written_by_session_id: str | None
    written_by_persona: str | None
    written_at: str

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        out = attrs.asdict(self, recurse=False)
        out["namespace"] = str(self.namespace)
        out["applies_to"] = dict(self.applies_to)
        return out


@attrs.frozen(kw_only=True)
class AuditEvent:
    """One memorule write, as recorded in the same transaction as the write."""

    memorule_id: str
    action: str
    written_by_session_id: str | None
    written_by_persona: str | None
    evidence_signal_id: str | None
    written_at: str
    tenant_id: str
    project_id: str

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (also the fields of the `memorule.audit` log event)."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class RecallMatch:
    """One result of `semantic_recall`; the memorule fields are None for other memories."""

    id: str
    namespace: Namespace
    kind: str
    text: str
    score: float
    memory_type: str | None
    created_at: str
    memorule_kind: str | None = None
    applies_to: Mapping[str, str] | None = None
    confidence: str | None = None
    evidence_signal_id: str | None = None
    written_at: str | None = None
    overlap: int | None = None
    rank_weight: int | None = None
    qpp: float | None = None
    band: float | None = None

    @property
    def source_type(self) -> str:
        """`memorule` for a memorule, `memory` for any other memory (`semantic_recall`'s filter)."""
        return "memorule" if self.kind == "memorule" else "memory"

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        out = attrs.asdict(self, recurse=False)
        out["namespace"] = str(self.namespace)
        out["source_type"] = self.source_type
        if self.applies_to is not None:
            out["applies_to"] = dict(self.applies_to)
        return out


@attrs.frozen(kw_only=True)
class _Fields:
    memorule_kind: str
    subject: str
    body: str
    applies_to: Mapping[str, str]
    confidence: str
    evidence_signal_id: str | None

    @property
    def text(self) -> str:
        return f"{self.subject}\n{self.body}"

    def applies_json(self) -> str:
        return json.dumps(dict(sorted(self.applies_to.items())), ensure_ascii=False, separators=(",", ":"))

    def metadata_json(self) -> str:
        return json.dumps(
            {
                "memorule_kind": self.memorule_kind,
                "applies_to": dict(sorted(self.applies_to.items())),
                "confidence": self.confidence,
                "evidence_signal_id": self.evidence_signal_id,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )


# -- validation -----------------------------------------------------------------------------


def _required(field: str) -> FieldError:
    return FieldError(field=field, code="required", message="is required for kind 'memorule'")


def _min_text_errors(field: str, value: object, minimum: int) -> list[FieldError]:
    errors = _validate.text_errors(field, value)
    if not errors and isinstance(value, str) and len(value.strip()) < minimum:
        errors.append(FieldError(field=field, code="too_short", message=f"must be at least {minimum} chars"))
    return errors


def _key_value_errors(key: str, value: object) -> list[FieldError]:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_KEY_CHARS or "\x00" in value:
        return [
            FieldError(
                field="applies_to",
                code="invalid_value",
                message=f"{key} must be a non-empty string of at most {MAX_KEY_CHARS} chars",
            )
        ]
    if key == "scope" and value not in SCOPES:
        return [
            FieldError(
                field="applies_to",
                code="invalid_choice",
                message=f"scope must be one of {', '.join(SCOPES)}; got {value!r}",
            )
        ]
    return []


def _applies_to_errors(value: object) -> list[FieldError]:
    if not isinstance(value, Mapping):
        return [FieldError(field="applies_to", code="type", message="must be an object of key -> string")]
    errors = [
        FieldError(
            field="applies_to",
            code="unknown_key",
            message=f"unknown key {k!r}; allowed: {', '.join(APPLIES_TO_KEYS)}",
        )
        for k in value
        if k not in APPLIES_TO_KEYS
    ]
    if not any(k in value for k in APPLIES_TO_KEYS):
        errors.append(
            FieldError(
                field="applies_to",
                code="empty",
                message=f"must set at least one of {', '.join(APPLIES_TO_KEYS)}",
            )
        )
    for key in APPLIES_TO_KEYS:
        if key in value:
            errors += _key_value_errors(key, value[key])
    return errors


def _field_errors(field: str, value: object) -> list[FieldError]:
    """Problems with one given (non-None) memorule field."""
    if field == "memorule_kind":
        return _validate.choice_errors(field, value, MEMORULE_KINDS, optional=False)
    if field == "subject":
        return _min_text_errors(field, value, MIN_SUBJECT_CHARS)
    if field == "body":
        return _min_text_errors(field, value, MIN_BODY_CHARS)
    if field == "applies_to":
        return _applies_to_errors(value)
    if field == "confidence":
        return _validate.choice_errors(field, value, CONFIDENCE_LEVELS, optional=False)
    return _validate.id_errors(field, value)  # evidence_signal_id


def _combined_errors(subject: str, body: str) -> list[FieldError]:
    if len(subject) + 1 + len(body) > _validate.MAX_TEXT_CHARS:
        return [
            FieldError(
                field="body",
                code="too_long",
                message=f"subject and body together must be at most {_validate.MAX_TEXT_CHARS} chars",
            )
        ]
    return []


def memorule_errors(  # noqa: PLR0913 - one keyword per field
    *,
    memorule_kind: object = None,
    subject: object = None,
    body: object = None,
    applies_to: object = None,
    evidence_signal_id: object = None,
    confidence: object = None,
    partial: bool = False,
) -> list[FieldError]:
    """Every problem with the fields of a memorule (empty when valid); writes nothing.

    `partial=True` checks the fields of an update: None means unchanged, not missing.
    """
    values = {
        "memorule_kind": memorule_kind,
        "subject": subject,
        "body": body,
        "applies_to": applies_to,
        "confidence": confidence,
        "evidence_signal_id": evidence_signal_id,
    }
    errors: list[FieldError] = []
    for field, value in values.items():
        if value is None:
            if not partial and field in ("memorule_kind", "subject", "body", "applies_to"):
                errors.append(_required(field))
            continue
        errors += _field_errors(field, value)
    if not errors and isinstance(subject, str) and isinstance(body, str):
        errors += _combined_errors(subject, body)
    return errors


def session_errors(session: object) -> list[FieldError]:
    """Problems with the writing session; None is one too: every memorule write names its writer."""
    if session is None:
        return [
            FieldError(field=f, code="required", message="is required to write a memorule (who wrote it)")
            for f in ("session_id", "persona")
        ]
    if not isinstance(session, WriterSession):
        return [
            FieldError(field="session", code="type", message="must be a WriterSession(session_id, persona)")
        ]
    errors = []
    for field in ("session_id", "persona"):
        value = getattr(session, field)
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_KEY_CHARS or "\x00" in value:
            errors.append(
                FieldError(
                    field=field,
                    code="invalid_value",
                    message=f"must be a non-empty string of at most {MAX_KEY_CHARS} chars",
                )
            )
        elif (hidden := hidden_character(value)) is not None:
            # Printed in `audit` and `history`: a newline here would forge a line of output.
            message = f"must not contain control or invisible characters (found U+{ord(hidden):04X})"
            errors.append(FieldError(field=field, code="invisible", message=message))
    return errors


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


# -- writes ---------------------------------------------------------------------------------


def remember(  # noqa: PLR0913 - the documented write API
    store: MemoryStore,
    *,
    namespace: Namespace,
    kind: str = "note",
    text: str | None = None,
    memorule_kind: str | None = None,
    subject: str | None = None,
    body: str | None = None,
    applies_to: Mapping[str, str] | None = None,
    evidence_signal_id: str | None = None,
    confidence: str | None = None,
    session: WriterSession | None = None,
    memory_type: str | None = None,
    id: str | None = None,  # noqa: A002 - the documented API name
    importance: float = 0.5,
    created_at: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> str:
    """Write one memory and return its id: the canonical write entry.

    `kind="memorule"` writes a memorule (`text`, if given, is its body); any other kind
    writes through `store.add_entry` as before, and the memorule-only fields must then be
    absent. Every field is validated first (`remember_errors`); a ValidationError carries
    every field error at once, and nothing is written then.
    """
    _validate.raise_if(
        remember_errors(
            kind=kind,
            text=text,
            memorule_kind=memorule_kind,
            subject=subject,
            body=body,
            applies_to=applies_to,
            evidence_signal_id=evidence_signal_id,
            confidence=confidence,
            session=session,
            memory_type=memory_type,
            id=id,
            importance=importance,
            created_at=created_at,
            metadata=metadata,
        )
    )
    if kind != "memorule":
        return store.add_entry(
            str(text),
            namespace=namespace,
            kind=kind,
            memory_type=memory_type,
            id=id,
            importance=importance,
            created_at=created_at,
            metadata=metadata,
        )
    fields = _Fields(
        memorule_kind=str(memorule_kind),
        subject=str(subject),
        body=str(body if body is not None else text),
        applies_to=dict(applies_to or {}),
        confidence=confidence or DEFAULT_CONFIDENCE,
        evidence_signal_id=evidence_signal_id,
    )
    return _create(store, namespace, fields, session, memory_type=memory_type, id=id, importance=importance)


def remember_errors(  # noqa: PLR0913 - mirrors `remember`
    *,
    kind: object = "note",
    text: object = None,
    memorule_kind: object = None,
    subject: object = None,
    body: object = None,
    applies_to: object = None,
    evidence_signal_id: object = None,
    confidence: object = None,
    session: object = None,
    memory_type: object = None,
    id: object = None,  # noqa: A002
    importance: object = 0.5,
    created_at: object = None,
    metadata: object = None,
) -> list[FieldError]:
    """Every problem `remember` would raise for these arguments (empty when valid)."""
    if kind != "memorule":
        memorule_only = {
            "memorule_kind": memorule_kind,
            "subject": subject,
            "body": body,
            "applies_to": applies_to,
            "evidence_signal_id": evidence_signal_id,
            "confidence": confidence,
            "session": session,
        }
        errors = [
            FieldError(field=f, code="not_allowed", message="is only accepted with kind 'memorule'")
            for f, v in memorule_only.items()
            if v is not None
        ]
        if text is None:
            errors.append(FieldError(field="text", code="required", message="is required"))
        entry = NewEntry(
            text="-" if text is None else text,  # type: ignore[arg-type] # _checked reports types
            kind=kind,  # type: ignore[arg-type]
            memory_type=memory_type,  # type: ignore[arg-type]
            id=id,  # type: ignore[arg-type]
            importance=importance,  # type: ignore[arg-type]
            created_at=created_at,  # type: ignore[arg-type]
            metadata=metadata,  # type: ignore[arg-type]
        )
        return errors + _checked(entry)[1]
    errors = []
    if text is not None and body is not None and text != body:
        errors.append(
            FieldError(field="text", code="conflict", message="give the body once, as body or as text")
        )
    errors += memorule_errors(
        memorule_kind=memorule_kind,
        subject=subject,
        body=body if body is not None else text,
        applies_to=applies_to,
        evidence_signal_id=evidence_signal_id,
        confidence=confidence,
    )
    errors += session_errors(session)
    errors += _validate.choice_errors("memory_type", memory_type, MEMORY_TYPES, optional=True)
    errors += _validate.id_errors("id", id)
    errors += _validate.importance_errors(importance)
    errors += [
        FieldError(field=f, code="not_allowed", message="is not accepted for kind 'memorule'")
        for f, v in (("created_at", created_at), ("metadata", metadata))
        if v is not None
    ]
    return errors


def _create(  # noqa: PLR0913
    store: MemoryStore,
    namespace: Namespace,
    fields: _Fields,
    session: WriterSession | None,
    *,
    memory_type: str | None,
    id: str | None,  # noqa: A002
    importance: float,
) -> str:
    now = _now()
    row = _Row(
        id=id or str(uuid.uuid4()),
        kind="memorule",
        memory_type=memory_type,
        text=fields.text,
        created_at=now,
        importance=float(importance),
        metadata=fields.metadata_json(),
    )
    vector = _embed(store, fields.text)
    with store.db.write() as conn:
        ns_id = _index.ensure_ns(conn, namespace)
        rowid = store._insert(conn, ns_id, namespace, row, replace=False)  # noqa: SLF001
        _store_vector(store, conn, ns_id, rowid, vector)
        _append_state(conn, rowid, fields, session, now)
        event = _append_audit(
            conn,
            namespace,
            row.id,
            action="create",
            session=session,
            evidence_signal_id=fields.evidence_signal_id,
            now=now,
        )
    _emit(event)
    return row.id


def update_memorule(  # noqa: PLR0913 - one keyword per field
    store: MemoryStore,
    id: str,  # noqa: A002
    *,
    namespace: Namespace,
    session: WriterSession | None = None,
    memorule_kind: str | None = None,
    subject: str | None = None,
    body: str | None = None,
    applies_to: Mapping[str, str] | None = None,
    evidence_signal_id: str | None = None,
    confidence: str | None = None,
) -> MemoruleState:
    """Append a new state to a memorule and return it.

    The fields given replace the current ones; None keeps them. ValidationError (every
    field error at once) if a field is invalid or the id is unknown.
    """
    changed = {
        "memorule_kind": memorule_kind,
        "subject": subject,
        "body": body,
        "applies_to": applies_to,
        "evidence_signal_id": evidence_signal_id,
        "confidence": confidence,
    }
    changed = {k: v for k, v in changed.items() if v is not None}
    errors = _validate.id_errors("id", id) + session_errors(session)
    for field, value in changed.items():
        errors += _field_errors(field, value)
    if not changed:
        errors.append(FieldError(field="update", code="empty", message="give at least one field to change"))
    _validate.raise_if(errors)
    embedded = _embed_changed_text(store, namespace, id, changed)
    with store.db.write() as conn:
        current = _current_or_raise(conn, namespace, id, repairing="applies_to" in changed)
        fields = _merged(current.fields, changed)
        _validate.raise_if(_combined_errors(fields.subject, fields.body))
        now = _now()
        _rewrite_entry(store, conn, current, fields, embedded)
        _append_state(conn, current.rowid, fields, session, now)
        event = _append_audit(
            conn,
            namespace,
            id,
            action="update",
            session=session,
            evidence_signal_id=fields.evidence_signal_id,
            now=now,
        )
    _emit(event)
    return _state_of(current, fields, session, now, version=current.version + 1)


def _merged(old: _Fields, changed: Mapping[str, Any]) -> _Fields:
    return _Fields(
        memorule_kind=changed.get("memorule_kind", old.memorule_kind),
        subject=changed.get("subject", old.subject),
        body=changed.get("body", old.body),
        applies_to=dict(changed.get("applies_to", old.applies_to)),
        confidence=changed.get("confidence", old.confidence),
        evidence_signal_id=changed.get("evidence_signal_id", old.evidence_signal_id),
    )


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
        current = _current(conn, namespace, id, repairing=True)
        if current is None:
            return False
        delete_entry_rowid(conn, current.ns_id, current.rowid)
        event = _append_audit(
            conn,
            namespace,
            id,
            action="delete",
            session=session,
            evidence_signal_id=evidence_signal_id,
            now=_now(),
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
        before = _current(conn, namespace, id, repairing=True)
    if before is None:
        return None
    text = _merged(before.fields, changed).text
    return None if text == before.text else (text, _embed(store, text))


def _rewrite_entry(
    store: MemoryStore,
    conn: sqlite3.Connection,
    current: _Current,
    fields: _Fields,
    embedded: tuple[str, Any] | None,
) -> None:
    """Point the entry row at the new state: metadata, and text, index and vector if changed.

    The vector embedded before the lock is used if the text is still the one embedded (a
    concurrent update may have changed it: then it is embedded here).
    """
    if fields.text != current.text:
        _index.remove_doc(conn, current.ns_id, _schema.CORPUS_ENTRIES, current.rowid)
        _index.add_doc(conn, current.ns_id, _schema.CORPUS_ENTRIES, current.rowid, fields.text)
        _vectors.delete_vectors(conn, _schema.CORPUS_ENTRIES, [current.rowid])
        vector = (
            embedded[1] if embedded is not None and embedded[0] == fields.text else _embed(store, fields.text)
        )
        _store_vector(store, conn, current.ns_id, current.rowid, vector)
    conn.execute(
        "UPDATE entries SET text = ?, metadata = ? WHERE rowid = ? AND ns_id = ?",
        (fields.text, fields.metadata_json(), current.rowid, current.ns_id),
    )


# Vectors: a store with an embedder keeps one vector per entry (dense and hybrid recall), so
# a memorule's vector is written (or replaced) in the same transaction as its text.


def _embed(store: MemoryStore, text: str) -> Any:  # noqa: ANN401 - numpy array or None
    return None if store.embedder is None else store.embedder.embed([text])


def _store_vector(store: MemoryStore, conn: sqlite3.Connection, ns_id: int, rowid: int, vector: Any) -> None:  # noqa: ANN401
    if vector is not None and store.embedder is not None:
        _vectors.store_vectors(conn, ns_id, _schema.CORPUS_ENTRIES, [rowid], vector, store.embedder.model_id)


def _append_state(
    conn: sqlite3.Connection, rowid: int, fields: _Fields, session: WriterSession | None, now: str
) -> None:
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
            None if session is None else session.session_id,
            None if session is None else session.persona,
            now,
        ),
    )


def _append_audit(  # noqa: PLR0913
    conn: sqlite3.Connection,
    namespace: Namespace,
    memorule_id: str,
    *,
    action: str,
    session: WriterSession | None,
    evidence_signal_id: str | None,
    now: str,
) -> AuditEvent:
    event = AuditEvent(
        memorule_id=memorule_id,
        action=action,
        written_by_session_id=None if session is None else session.session_id,
        written_by_persona=None if session is None else session.persona,
        evidence_signal_id=evidence_signal_id,
        written_at=now,
        tenant_id=namespace.tenant_id,
        project_id=namespace.project_id,
    )
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


# -- reading current state ------------------------------------------------------------------

_CURRENT_COLS = (
    "e.rowid, e.id, e.ns_id, e.tenant_id, e.project_id, e.memory_type, e.text, e.created_at, "
    "s.rowid, s.memorule_kind, s.subject, s.body, s.applies_to, s.evidence_signal_id, s.confidence, "
    "s.written_by_session_id, s.written_by_persona, s.written_at, "
    "(SELECT count(*) FROM memorule_states c WHERE c.entry_rowid = e.rowid)"
)
_CURRENT_JOIN = (
    "JOIN memorule_states s ON s.rowid = "
    "(SELECT max(m.rowid) FROM memorule_states m WHERE m.entry_rowid = e.rowid)"
)


@attrs.frozen(kw_only=True)
class _Current:
    """A memorule's entry row joined with its newest state."""

    rowid: int
    id: str
    ns_id: int
    namespace: Namespace
    memory_type: str | None
    text: str
    created_at: str
    state_rowid: int
    fields: _Fields
    written_by_session_id: str | None
    written_by_persona: str | None
    written_at: str
    version: int

    @classmethod
    def from_row(cls, r: Sequence[Any], *, repairing: bool = False) -> _Current:
        """Build from a row of _CURRENT_COLS; DamagedRowError if its applies_to does not decode,
        unless `repairing` (the caller replaces it), when it reads as empty."""
        try:
            applies_to = _decode_applies(r[12])
        except _validate.DamagedRowError:
            if not repairing:
                raise
            applies_to = {}
        return cls(
            rowid=int(r[0]),
            id=str(r[1]),
            ns_id=int(r[2]),
            namespace=Namespace(tenant_id=r[3], project_id=r[4]),
            memory_type=r[5],
            text=str(r[6]),
            created_at=str(r[7]),
            state_rowid=int(r[8]),
            fields=_Fields(
                memorule_kind=str(r[9]),
                subject=str(r[10]),
                body=str(r[11]),
                applies_to=applies_to,
                evidence_signal_id=r[13],
                confidence=str(r[14]),
            ),
            written_by_session_id=r[15],
            written_by_persona=r[16],
            written_at=str(r[17]),
            version=int(r[18]),
        )

    def state(self) -> MemoruleState:
        session = (
            None
            if self.written_by_session_id is None
            else WriterSession(session_id=self.written_by_session_id, persona=self.written_by_persona or "")
        )
        return _state_of(self, self.fields, session, self.written_at, version=self.version)


def _decode_applies(raw: str) -> dict[str, str]:
    value = _validate.decode_json(raw, column="applies_to", default="{}")
    if not isinstance(value, dict):
        raise _validate.DamagedRowError("applies_to is not a JSON object")
    return {str(k): str(v) for k, v in value.items()}


def _state_of(
    current: _Current, fields: _Fields, session: WriterSession | None, written_at: str, *, version: int
) -> MemoruleState:
    return MemoruleState(
        memorule_id=current.id,
        namespace=current.namespace,
        version=version,
        memorule_kind=fields.memorule_kind,
        subject=fields.subject,
        body=fields.body,
        applies_to=dict(fields.applies_to),
        confidence=fields.confidence,
        evidence_signal_id=fields.evidence_signal_id,
        written_by_session_id=None if session is None else session.session_id,
        written_by_persona=None if session is None else session.persona,
        written_at=written_at,
    )


def _current(
    conn: sqlite3.Connection,
    namespace: Namespace,
    id: str,  # noqa: A002
    *,
    repairing: bool = False,
) -> _Current | None:
    """The memorule's entry with its newest state (see `_Current.from_row` for `repairing`)."""
    ns_id = _index.find_ns(conn, namespace)
    if ns_id is None:
        return None
    row = conn.execute(
        f"SELECT {_CURRENT_COLS} FROM entries e {_CURRENT_JOIN} "
        "WHERE e.ns_id = ? AND e.id = ? AND e.kind = 'memorule'",
        (ns_id, id),
    ).fetchone()
    return None if row is None else _Current.from_row(row, repairing=repairing)


def _current_or_raise(
    conn: sqlite3.Connection,
    namespace: Namespace,
    id: str,  # noqa: A002
    *,
    repairing: bool = False,
) -> _Current:
    try:
        current = _current(conn, namespace, id, repairing=repairing)
    except _validate.DamagedRowError as exc:
        raise ValidationError.single(
            "applies_to", "damaged", f"memorule {id!r}: the stored {exc}; give applies_to to replace it"
        ) from exc
    if current is None:
        raise ValidationError.single("id", "not_found", f"no memorule {id!r} in {namespace}")
    return current


def memorule_history(store: MemoryStore, id: str, *, namespace: Namespace) -> list[MemoruleState]:  # noqa: A002
    """Every state of a memorule, oldest first (the last is current); [] if unknown or deleted."""
    with store.db.read() as conn:
        ns_id = _index.find_ns(conn, namespace)
        if ns_id is None:
            return []
        rows = conn.execute(
            "SELECT s.memorule_kind, s.subject, s.body, s.applies_to, s.evidence_signal_id, s.confidence, "
            "s.written_by_session_id, s.written_by_persona, s.written_at FROM entries e "
            "JOIN memorule_states s ON s.entry_rowid = e.rowid "
            "WHERE e.ns_id = ? AND e.id = ? AND e.kind = 'memorule' ORDER BY s.rowid",
            (ns_id, id),
        ).fetchall()

    def state(numbered: tuple[int, Sequence[Any]]) -> MemoruleState:
        version, r = numbered
        return MemoruleState(
            memorule_id=id,
            namespace=namespace,
            version=version,
            memorule_kind=r[0],
            subject=r[1],
            body=r[2],
            applies_to=_decode_applies(r[3]),
            evidence_signal_id=r[4],
            confidence=r[5],
            written_by_session_id=r[6],
            written_by_persona=r[7],
            written_at=r[8],
        )

    # A damaged state is left out; the others keep their version numbers.
    return list(
        _validate.skip_damaged(
            enumerate(rows, start=1), state, table="memorule_states", row_id=lambda n: f"{id} v{n[0]}"
        )
    )


def audit_events(
    store: MemoryStore, *, since: str | datetime | None = None, tenant: str | None = None
) -> list[AuditEvent]:
    """Return audit events in commit order.

    Optionally only those from `since` (ISO-8601, inclusive) and of one tenant.
    ValidationError if `since` is not a timestamp.
    """
    where, params = [], []
    if since is not None:
        moment, errors = _validate.normalise_created_at(since)
        _validate.raise_if([attrs.evolve(e, field="since") for e in errors])
        where.append("written_at >= ?")
        params.append(moment)
    if tenant is not None:
        where.append("tenant_id = ?")
        params.append(tenant)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    with store.db.read() as conn:
        rows = conn.execute(
            "SELECT memorule_id, action, written_by_session_id, written_by_persona, evidence_signal_id, "
            f"written_at, tenant_id, project_id FROM memorule_audit{clause} ORDER BY rowid",
            params,
        ).fetchall()
    return [
        AuditEvent(
            memorule_id=r[0],
            action=r[1],
            written_by_session_id=r[2],
            written_by_persona=r[3],
            evidence_signal_id=r[4],
            written_at=r[5],
            tenant_id=r[6],
            project_id=r[7],
        )
        for r in rows
    ]


# -- recall ---------------------------------------------------------------------------------


def context_overlap(applies_to: Mapping[str, str], context: SessionContext) -> int | None:
    """Count a memorule's applies_to keys that match the context; None if one contradicts it.

    A key the context leaves unset matches nothing and contradicts nothing. See the module
    docstring for the rules, `scope` in particular.
    """
    ctx = context.as_dict()
    overlap = 0
    for key, value in applies_to.items():
        want = ctx.get(key)
        if want is None:
            continue
        if key == "scope":
            fits = _BREADTH.get(value, -1) >= _BREADTH[want] if want in _BREADTH else value == want
        else:
            fits = want == value
        if not fits:
            return None
        overlap += 1
    return overlap


def rank_key(overlap: int, confidence: str) -> tuple[int, int]:
    """The leading keys of the memorule ranking (higher first): overlap x weight, then weight."""
    weight = CONFIDENCE_WEIGHTS[confidence]
    return (overlap * weight, weight)


@attrs.frozen(kw_only=True)
class _Hit:
    current: _Current
    score: float
    qpp: float | None = None
    band: float | None = None


def _visible_namespaces(conn: sqlite3.Connection, namespace: Namespace) -> tuple[int | None, list[int]]:
    """Return the namespaces whose memorules may apply: (own ns_id, other ns_ids).

    The others are the tenant's other projects that hold any memorule; of those only the
    tenant-wide (global/org) ones count.
    """
    others = conn.execute(
        "SELECT n.ns_id FROM namespaces n WHERE n.tenant_id = ? AND n.project_id != ? "
        "AND EXISTS (SELECT 1 FROM entries e WHERE e.ns_id = n.ns_id AND e.kind = 'memorule') "
        "ORDER BY n.ns_id",
        (namespace.tenant_id, namespace.project_id),
    ).fetchall()
    return _index.find_ns(conn, namespace), [int(r[0]) for r in others]


_ANY_MEMORULE = "SELECT 1 FROM entries WHERE ns_id = ? AND kind = 'memorule' LIMIT 1"


@attrs.define(eq=False)
class _Probe:
    """One recall's query over the namespaces it may see, embedded at most once.

    Every hit is scored against the statistics of the namespace asked in, as every other
    candidate of the turn is (so equal relevance gets an equal score); a namespace that
    holds nothing yet has no statistics, and then a memorule is scored against its own.
    """

    store: MemoryStore
    conn: sqlite3.Connection
    query: str
    mode: str
    depth: int
    asking: QueryProfile | None
    asking_ns: int | None
    embedder: Embedder | None

    @classmethod
    def build(  # noqa: PLR0913
        cls,
        store: MemoryStore,
        conn: sqlite3.Connection,
        query: str,
        *,
        own_ns: int | None,
        mode: str | None,
        depth: int,
        embedder: Embedder | None,
    ) -> _Probe:
        mode = check_mode(mode or store.mode)
        embedder = embedder or store.embedder
        if mode in DENSE_MODES and embedder is None:
            msg = f"recall mode {mode!r} needs an embedder; open the store with one or use mode='lexical'"
            raise ConfigError(msg)
        if embedder is not None and not isinstance(embedder, QueryCache):
            embedder = QueryCache(embedder)  # one query embedding for every namespace probed
        asking = None if own_ns is None else _index.profile(conn, own_ns, query)
        return cls(
            store=store,
            conn=conn,
            query=query,
            mode=mode,
            depth=depth,
            asking=asking,
            asking_ns=own_ns,
            embedder=embedder,
        )

    def hits(
        self, ns_id: int, *, foreign: bool, keep: Callable[[_Current], bool] | None = None
    ) -> list[_Hit]:
        """Memorules of one namespace sharing a term with the query, scored.

        `keep` filters them before scoring (scoring is the Python-heavy part).
        """
        # Most namespaces hold no memorule: an indexed look-up spares the FTS query.
        if self.conn.execute(_ANY_MEMORULE, (ns_id,)).fetchone() is None:
            return []
        home = _index.profile(self.conn, ns_id, self.query)
        if not home.present:
            return []
        table = _schema.fts_table(ns_id)
        # json_extract raises on a damaged applies_to; CASE only reads the valid ones.
        tenant_wide = (
            " AND CASE WHEN json_valid(s.applies_to) THEN json_extract(s.applies_to, '$.scope') END"
            " IN ('global', 'org')"
            if foreign
            else ""
        )
        rows = self.conn.execute(
            f"SELECT {_CURRENT_COLS} FROM {table} JOIN entries e ON e.rowid = ({table}.rowid >> 2) "
            f"{_CURRENT_JOIN} WHERE {table} MATCH ? AND ({table}.rowid & 3) = 0 "
            f"AND e.kind = 'memorule'{tenant_wide} ORDER BY bm25({table}) LIMIT ?",
            (_analysis.fts_query(tuple(sorted(home.present))), self.depth),
        ).fetchall()
        found = list(
            _validate.skip_damaged(rows, _Current.from_row, table="memorule_states", row_id=lambda r: r[1])
        )
        if keep is not None:
            found = [c for c in found if keep(c)]
        if self.asking is not None and self.asking.present:
            prof, where = self.asking, self.asking_ns
        else:
            prof, where = home, ns_id
        scores = self._scores(ns_id, where, prof, found)
        return [
            _Hit(current=c, score=r.score, qpp=r.qpp, band=r.band) for c, r in zip(found, scores, strict=True)
        ]

    def _scores(
        self, home: int, ns_id: int | None, prof: QueryProfile, found: list[_Current]
    ) -> list[Relevance]:
        """Score memorules of namespace `home` on the store's calibrated scale in its mode
        (lexical without an embedder), with the reference of the namespace `ns_id` the query
        was profiled in."""
        if not found:
            return []
        embedder = self.embedder
        mode = "lexical" if embedder is None else self.mode
        scorer = self.store.scorer_on(self.conn, ns_id, prof, self.query, mode=mode, embedder=embedder)
        if mode == "lexical" or embedder is None:
            return [scorer.relevance(_analysis.terms(c.text)) for c in found]
        stored = _vectors.stored_vectors(
            self.conn,
            home,
            _schema.CORPUS_ENTRIES,
            [c.rowid for c in found],
            embedder.model_id,
            embedder.dim,
        )
        texts = [c.text for c in found]
        return scorer.relevances(
            [_analysis.terms(t) for t in texts], texts, [stored.get(c.rowid) for c in found]
        )


def recall_memorules_on(  # noqa: PLR0913
    store: MemoryStore,
    conn: sqlite3.Connection,
    query: str,
    *,
    namespace: Namespace,
    context: SessionContext,
    top_k: int = 10,
    types: Sequence[str] | None = None,
    mode: str | None = None,
    embedder: Embedder | None = None,
) -> list[RecallMatch]:
    """Recall memorules on a reader connection the caller holds, in ranking order.

    Those visible from `namespace`, relevant to `query` (at or above the floor) and not
    contradicting `context`. `embedder` (default: the store's) embeds the query in dense modes;
    sources pass their reader's, which caches the turn's task vector.
    """
    own_ns, others = _visible_namespaces(conn, namespace)
    probe = _Probe.build(
        store, conn, query, own_ns=own_ns, mode=mode, depth=max(10 * top_k, _DEPTH_MIN), embedder=embedder
    )

    def keep(c: _Current) -> bool:
        typed = types is None or c.memory_type is None or c.memory_type in types
        return typed and context_overlap(c.fields.applies_to, context) is not None

    hits = [] if own_ns is None else probe.hits(own_ns, foreign=False, keep=keep)
    for ns_id in others:
        hits += probe.hits(ns_id, foreign=True, keep=keep)
    matches = [
        (hit, overlap)
        for hit in hits
        if hit.score >= RECALL_MIN_SCORE
        and (overlap := context_overlap(hit.current.fields.applies_to, context)) is not None
    ]
    matches.sort(key=lambda m: m[0].current.id)
    matches.sort(
        key=lambda m: (
            *rank_key(m[1], m[0].current.fields.confidence),
            m[0].current.written_at,
            m[0].current.state_rowid,
            m[0].score,
        ),
        reverse=True,
    )
    return [_match(hit, overlap) for hit, overlap in matches[:top_k]]


def _match(hit: _Hit, overlap: int | None) -> RecallMatch:
    c, f = hit.current, hit.current.fields
    return RecallMatch(
        id=c.id,
        namespace=c.namespace,
        kind="memorule",
        text=c.text,
        score=hit.score,
        qpp=hit.qpp,
        band=hit.band,
        memory_type=c.memory_type,
        created_at=c.created_at,
        memorule_kind=f.memorule_kind,
        applies_to=dict(f.applies_to),
        confidence=f.confidence,
        evidence_signal_id=f.evidence_signal_id,
        written_at=c.written_at,
        overlap=overlap,
        rank_weight=None if overlap is None else rank_key(overlap, f.confidence)[0],
    )


def _recall_args_errors(
    query: object, source_type: object, top_k: object, context: object, mode: object
) -> list[FieldError]:
    errors = _validate.text_errors("query", query)
    errors += _validate.choice_errors("mode", mode, ("lexical", "dense", "hybrid"), optional=True)
    errors += _validate.choice_errors("source_type", source_type, SOURCE_TYPES, optional=False)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        errors.append(
            FieldError(field="top_k", code="out_of_range", message=f"must be an integer in 1..{MAX_TOP_K}")
        )
    if not isinstance(context, SessionContext):
        errors.append(FieldError(field="context", code="type", message="must be a SessionContext"))
    elif context.scope is not None and context.scope not in SCOPES:
        errors.append(
            FieldError(
                field="context", code="invalid_choice", message=f"scope must be one of {', '.join(SCOPES)}"
            )
        )
    return errors


def semantic_recall(  # noqa: PLR0913
    store: MemoryStore,
    query: str,
    *,
    namespace: Namespace,
    source_type: str = "memory",
    top_k: int = 10,
    context: SessionContext | None = None,
    mode: str | None = None,
    types: Sequence[str] | None = None,
) -> list[RecallMatch]:
    """Recall memories at or above the one calibrated floor.

    `source_type="memorule"`: memorules only, those not contradicting `context` (None: an
    empty one), in memorule ranking order (module docstring). `"memory"`: every memory of the
    namespace (memorules included, whatever their applies_to) plus the tenant's global/org
    memorules of other projects, best score first. `types` keeps memories of those types
    (and unclassified memorules), as a turn's typed request does.
    """
    context = SessionContext() if context is None else context
    errors = _recall_args_errors(query, source_type, top_k, context, mode)
    if types is not None:
        errors += types_errors(types)
    _validate.raise_if(errors)
    with store.db.read() as conn:
        if source_type == "memorule":
            return recall_memorules_on(
                store, conn, query, namespace=namespace, context=context, top_k=top_k, mode=mode, types=types
            )
        return _recall_memory_on(store, conn, query, namespace=namespace, top_k=top_k, mode=mode, types=types)


def _recall_memory_on(  # noqa: PLR0913
    store: MemoryStore,
    conn: sqlite3.Connection,
    query: str,
    *,
    namespace: Namespace,
    top_k: int,
    mode: str | None,
    types: Sequence[str] | None = None,
) -> list[RecallMatch]:
    kwargs: dict[str, Any] = {} if mode is None else {"mode": mode}
    if types is not None:
        kwargs["types"] = tuple(types)
    own = store.recall_on(conn, query, namespace=namespace, limit=top_k, **kwargs)

    def matched(r: Recalled) -> RecallMatch:
        m = r.memory
        current = _current(conn, namespace, m.id) if m.kind == "memorule" else None
        if current is not None:
            return _match(_Hit(current=current, score=r.score, qpp=r.qpp, band=r.band), None)
        return RecallMatch(
            id=m.id,
            namespace=m.namespace,
            kind=m.kind,
            text=m.text,
            score=r.score,
            memory_type=m.memory_type,
            created_at=m.created_at,
        )

    out = list(_validate.skip_damaged(own, matched, table="memorule_states", row_id=lambda r: r.memory.id))
    own_ns, others = _visible_namespaces(conn, namespace)
    probe = _Probe.build(
        store, conn, query, own_ns=own_ns, mode=mode, depth=max(4 * top_k, 50), embedder=None
    )

    def typed(c: _Current) -> bool:
        return types is None or c.memory_type is None or c.memory_type in types

    for ns_id in others:
        out += [
            _match(h, None)
            for h in probe.hits(ns_id, foreign=True, keep=typed)
            if h.score >= RECALL_MIN_SCORE
        ]
    out.sort(key=lambda m: (-m.score, m.id))
    return out[:top_k]


# -- the source -----------------------------------------------------------------------------


@attrs.define(eq=False)
class MemorulesSource(ReaderSource):
    """The memorules that apply to the turn's session context and task (`memorules` block).

    A candidate's score is its calibrated relevance (so the one floor applies as
    everywhere); candidates come in memorule ranking order, carried as `Candidate.rank`
    (0 = first; also `metadata["memorule_rank"]`), which the selector, admission and the
    context follow. A turn without a session context still ranks them (by confidence).
    """

    name: ClassVar[str] = "memorules"

    def _version(self, conn: sqlite3.Connection, request: SourceRequest) -> _results.Version:
        """Every generation of the tenant: the tenant-wide rules of its other projects apply."""
        return _results.tenant_version(conn, request.namespace)

    def _fetch_on(self, conn: sqlite3.Connection, *, request: SourceRequest) -> list[Candidate]:
        if not request.task.strip():
            return []
        matches = recall_memorules_on(
            self._reader.store,
            conn,
            request.task,
            namespace=request.namespace,
            context=request.context or SessionContext(),
            top_k=min(max(request.limit, 1), MAX_TOP_K),
            types=request.types,
            mode=request.mode,
            embedder=self._reader.embedder,
        )
        return [self._candidate(m, rank) for rank, m in enumerate(matches)]

    def _candidate(self, m: RecallMatch, rank: int) -> Candidate:
        return Candidate(
            entry_id=m.id,
            source=self.name,
            score=m.score,
            qpp=m.qpp,
            band=m.band,
            text=m.text,
            block="memorules",
            memory_type=m.memory_type,
            created_at=m.written_at,
            rank=rank,
            metadata={
                "kind": "memorule",
                "memorule_kind": m.memorule_kind,
                "applies_to": dict(m.applies_to or {}),
                "confidence": m.confidence,
                "evidence_signal_id": m.evidence_signal_id,
                "memorule_rank": rank,
                "rank_weight": m.rank_weight,
                "namespace": str(m.namespace),
            },
        )


__all__ = [
    "APPLIES_TO_KEYS",
    "CONFIDENCE_LEVELS",
    "CONFIDENCE_WEIGHTS",
    "MEMORULE_KINDS",
    "SCOPES",
    "AuditEvent",
    "MemoruleState",
    "MemorulesSource",
    "RecallMatch",
    "WriterSession",
    "audit_events",
    "context_overlap",
    "delete_memorule",
    "memorule_errors",
    "memorule_history",
    "recall_memorules_on",
    "remember",
    "semantic_recall",
    "update_memorule",
]
