"""Reading what writes recorded: a memorule's current state, its history, the audit events.

A memorule is an `entries` row of kind "memorule"; its fields live in versioned
`memorule_states` rows (the newest is current, the older ones are its history), and every
write appended a `memorule_audit` event. A state whose `applies_to` does not decode is
damaged: readers skip it (and log it) and serve the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs

from broker import Namespace, ValidationError
from sources.storage import _validate

from ._values import AuditEvent, MemoruleFields, MemoruleState, Stamp, WriterSession

if TYPE_CHECKING:
    from sources._store import MemoryStore
    from sources.storage._engine import Reader


@attrs.frozen(kw_only=True)
class Current:
    """A memorule's entry row joined with its newest state (`CurrentRecord`, made a value)."""

    rowid: int
    id: str
    ns_id: int
    namespace: Namespace
    memory_type: str | None
    text: str
    created_at: str
    state_rowid: int
    fields: MemoruleFields
    stamp: Stamp
    version: int

    @property
    def written_at(self) -> str:
        """When the current state was written."""
        return self.stamp.at

    @classmethod
    def from_row(cls, r: Sequence[Any], *, repairing: bool = False) -> Current:
        """Build from a `CurrentRecord`; DamagedRowError if its applies_to does not decode,
        unless `repairing` (the caller replaces it), when it reads as empty."""
        try:
            applies_to = decode_applies(r[12])
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
            fields=_fields(r[9:12], applies_to, r[13:15]),
            stamp=_stamp(r[15:18]),
            version=int(r[18]),
        )

    def state(self) -> MemoruleState:
        """The current state, as `memorule_history` gives it."""
        return MemoruleState.of(self.id, self.namespace, self.fields, self.stamp, version=self.version)


def _fields(texts: Sequence[Any], applies_to: dict[str, str], rest: Sequence[Any]) -> MemoruleFields:
    """A state's fields: (memorule_kind, subject, body), applies_to, (evidence, confidence)."""
    return MemoruleFields(
        memorule_kind=str(texts[0]),
        subject=str(texts[1]),
        body=str(texts[2]),
        applies_to=applies_to,
        evidence_signal_id=rest[0],
        confidence=str(rest[1]),
    )


def _stamp(r: Sequence[Any]) -> Stamp:
    """A state's writer and time: (session id, persona, written_at)."""
    session = None if r[0] is None else WriterSession(session_id=r[0], persona=r[1] or "")
    return Stamp(session=session, at=str(r[2]))


def decode_applies(raw: str) -> dict[str, str]:
    """A stored `applies_to`; DamagedRowError if it is not a JSON object."""
    value = _validate.decode_json(raw, column="applies_to", default="{}")
    if not isinstance(value, dict):
        raise _validate.DamagedRowError("applies_to is not a JSON object")
    return {str(k): str(v) for k, v in value.items()}


def current(
    conn: Reader,
    namespace: Namespace,
    id: str,  # noqa: A002
    *,
    repairing: bool = False,
) -> Current | None:
    """The memorule's entry with its newest state (see `Current.from_row` for `repairing`)."""
    ns_id = conn.namespace_id(namespace)
    row = None if ns_id is None else conn.memorules.current(ns_id, id)
    return None if row is None else Current.from_row(row, repairing=repairing)


def current_or_raise(
    conn: Reader,
    namespace: Namespace,
    id: str,  # noqa: A002
    *,
    repairing: bool = False,
) -> Current:
    """`current`, or ValidationError naming the unknown id or the damaged `applies_to`."""
    try:
        found = current(conn, namespace, id, repairing=repairing)
    except _validate.DamagedRowError as exc:
        raise ValidationError.single(
            "applies_to", "damaged", f"memorule {id!r}: the stored {exc}; give applies_to to replace it"
        ) from exc
    if found is None:
        raise ValidationError.single("id", "not_found", f"no memorule {id!r} in {namespace}")
    return found


def memorule_history(store: MemoryStore, id: str, *, namespace: Namespace) -> list[MemoruleState]:  # noqa: A002
    """Every state of a memorule, oldest first (the last is current); [] if unknown or deleted."""
    with store.engine.read() as conn:
        ns_id = conn.namespace_id(namespace)
        if ns_id is None:
            return []
        rows = conn.memorules.history(ns_id, id)

    def state(numbered: tuple[int, Sequence[Any]]) -> MemoruleState:
        version, r = numbered
        return MemoruleState(
            memorule_id=id,
            namespace=namespace,
            version=version,
            memorule_kind=r[0],
            subject=r[1],
            body=r[2],
            applies_to=decode_applies(r[3]),
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
    moment = None
    if since is not None:
        moment, errors = _validate.normalise_created_at(since)
        _validate.raise_if([attrs.evolve(e, field="since") for e in errors])
    with store.engine.read() as conn:
        rows = conn.memorules.audit(since=moment, tenant_id=tenant)
    return [AuditEvent(**r._asdict()) for r in rows]
