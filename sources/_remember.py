"""The one front for writing a memory: `remember`, a note (any entry kind) or a memorule.

A write is a `MemoryWrite`, a frozen request whose attrs validators hold every rule of every
field, so one ValidationError reports all of them at once and nothing is written. Notes go on
to the store's batch write (`MemoryStore.add_entries`); memorules to `create_memorule`, which
writes the row, its first state and its audit event in one transaction. `remember_errors`
runs the same validators without writing (the CLI, the MCP server and `ingest` report with
it). `MemoryStore.add_entry` / `add_entries` stay the store's own primitive for notes in bulk;
they refuse memorules, which only this front writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from broker import MEMORY_TYPES, FieldError, Namespace

from ._memorules import (
    DEFAULT_CONFIDENCE,
    FIELD_NAMES,
    MemoruleFields,
    NewMemorule,
    WriterSession,
    create_memorule,
    field_errors,
    fields_errors,
    session_errors,
)
from ._store import MemoryStore
from .storage import _validate
from .storage._entries import NEURON_WRITE, NewEntry

_MEMORULE: Final = "memorule"
_NEURON: Final = "neuron"
REMEMBER_KINDS: Final = tuple(k for k in _validate.KINDS if k != _NEURON)
"""The kinds `remember` writes: every kind the store holds but a neuron (its triggers are
written with it: `add_neurons`, an ingest `neuron` record)."""


def _only_memorule(field: str, value: object) -> list[FieldError]:
    """A memorule's field given to another kind."""
    if value is None:
        return []
    return [FieldError(field=field, code="not_allowed", message="is only accepted with kind 'memorule'")]


def _not_memorule(field: str, value: object) -> list[FieldError]:
    """A note's field given to a memorule."""
    if value is None:
        return []
    return [FieldError(field=field, code="not_allowed", message="is not accepted for kind 'memorule'")]


def _by_kind(*, memorule: _validate.Rule, other: _validate.Rule) -> _validate.Validator:
    """The validator of a field whose rule depends on the kind written."""

    def validate(write: MemoryWrite, attribute: attrs.Attribute[Any], value: object) -> None:
        rule = memorule if write.kind == _MEMORULE else other
        _validate.raise_if(rule(attribute.name, value))

    return validate


def _check_text(write: MemoryWrite, attribute: attrs.Attribute[Any], value: object) -> None:
    """A note's text is required; a memorule's is its body, which must not be given twice."""
    if write.kind != _MEMORULE:
        missing = FieldError(field=attribute.name, code="required", message="is required")
        _validate.raise_if([missing] if value is None else _validate.text_errors(attribute.name, value))
    elif value is not None and write.body is not None and value != write.body:
        conflict = FieldError(field="text", code="conflict", message="give the body once, as body or as text")
        _validate.raise_if([conflict])


def _check_body(write: MemoryWrite, attribute: attrs.Attribute[Any], value: object) -> None:
    """A memorule's body (or its text), and subject and body together once all fields are valid."""
    if write.kind != _MEMORULE:
        _validate.raise_if(_only_memorule(attribute.name, value))
        return
    _validate.raise_if([e for e in fields_errors(_memorule_values(write)) if e.field == "body"])


def _memorule_values(write: MemoryWrite) -> dict[str, object]:
    """The memorule fields of a write, its text standing for a body not given."""
    values = {field: getattr(write, field) for field in FIELD_NAMES}
    values["body"] = write.body if write.body is not None else write.text
    return values


def _session_errors(_field: str, value: object) -> list[FieldError]:
    return session_errors(value)  # its own fields: session_id, persona


def _importance_errors(_field: str, value: object) -> list[FieldError]:
    return _validate.importance_errors(value)


def _created_at_errors(_field: str, value: object) -> list[FieldError]:
    return _validate.normalise_created_at(value)[1]


def _metadata_errors(_field: str, value: object) -> list[FieldError]:
    return _validate.encode_metadata(value)[1]


def _kind_errors(field: str, value: object) -> list[FieldError]:
    """A kind the store accepts, but not a neuron: one without trigger phrases is stored where
    no turn reads it (the neurons source reads its triggers, the store source skips neurons)."""
    if value == _NEURON:
        return [attrs.evolve(NEURON_WRITE, field=field)]
    return _validate.choice(REMEMBER_KINDS)(field, value)


_MEMORULE_FIELD = _by_kind(memorule=field_errors, other=_only_memorule)


@attrs.frozen(kw_only=True)
class MemoryWrite:
    """One memory to write, validated whole: a ValidationError names every invalid field.

    `kind="memorule"` writes a memorule (`text`, if given, is its body) and needs a `session`;
    any other kind writes an entry, and the memorule-only fields must then be absent.
    """

    text: str | None = attrs.field(default=None, validator=_check_text)
    kind: str = attrs.field(default="note", validator=_validate.check(_kind_errors))
    memorule_kind: str | None = attrs.field(default=None, validator=_MEMORULE_FIELD)
    subject: str | None = attrs.field(default=None, validator=_MEMORULE_FIELD)
    body: str | None = attrs.field(default=None, validator=_check_body)
    applies_to: Mapping[str, str] | None = attrs.field(default=None, validator=_MEMORULE_FIELD)
    confidence: str | None = attrs.field(default=None, validator=_MEMORULE_FIELD)
    evidence_signal_id: str | None = attrs.field(default=None, validator=_MEMORULE_FIELD)
    session: WriterSession | None = attrs.field(
        default=None, validator=_by_kind(memorule=_session_errors, other=_only_memorule)
    )
    memory_type: str | None = attrs.field(
        default=None, validator=_validate.check(_validate.choice(MEMORY_TYPES, optional=True))
    )
    id: str | None = attrs.field(default=None, validator=_validate.check(_validate.id_errors))
    importance: float = attrs.field(default=0.5, validator=_validate.check(_importance_errors))
    created_at: str | None = attrs.field(
        default=None, validator=_by_kind(memorule=_not_memorule, other=_created_at_errors)
    )
    metadata: Mapping[str, Any] | None = attrs.field(
        default=None, validator=_by_kind(memorule=_not_memorule, other=_metadata_errors)
    )

    def entry(self) -> NewEntry:
        """The store entry of a write of any kind but memorule."""
        return NewEntry(
            text=str(self.text),
            kind=self.kind,
            memory_type=self.memory_type,
            id=self.id,
            importance=self.importance,
            created_at=self.created_at,
            metadata=self.metadata,
        )

    def memorule(self) -> NewMemorule:
        """The memorule of a write of kind memorule (its confidence defaults to inferred)."""
        values = _memorule_values(self)
        values["applies_to"] = dict(self.applies_to or {})
        values["confidence"] = self.confidence or DEFAULT_CONFIDENCE
        return NewMemorule(
            fields=MemoruleFields(**values),  # type: ignore[arg-type] # validated
            session=self.session,
            memory_type=self.memory_type,
            id=self.id,
            importance=self.importance,
        )


def remember(  # noqa: PLR0913 - the documented write API: one keyword per field of MemoryWrite
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
    writes through the store as `MemoryStore.add_entry` does, and the memorule-only fields
    must then be absent. Every field is validated first (`remember_errors`); a
    ValidationError carries every field error at once, and nothing is written then.
    """
    # The keywords are MemoryWrite's fields, one for one (this reads them before any other local).
    fields = {k: v for k, v in locals().items() if k not in {"store", "namespace"}}
    return write(store, _validate.build(MemoryWrite, fields), namespace=namespace)


def write(store: MemoryStore, request: MemoryWrite, *, namespace: Namespace) -> str:
    """Write a validated request into `namespace`; its id."""
    if request.kind == _MEMORULE:
        return create_memorule(store, namespace, request.memorule())
    return store.add_entries([request.entry()], namespace=namespace)[0]


def remember_errors(**fields: object) -> list[FieldError]:
    """Every problem `remember` would raise for these fields (empty when valid); writes nothing.

    The fields are `remember`'s keywords but the store and the namespace; TypeError for another.
    """
    return _validate.collect(MemoryWrite, fields)
