"""The entries' values and checks: what a memory is, what a write gives, what recall returns.

`MemoryStore` (sources._store) writes and reads them; `sources._entry_recall` recalls them.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

import attrs

from broker import MEMORY_TYPES, FieldError, Namespace

from . import _validate

MAX_RECALL_LIMIT = 1000
TURN_HEAD_CHARS = 86
"""How much of an episodic entry's text `is_turn` reads (the engines read no more): a speaker
of four words of 20 characters, their spaces, ": " and a character."""
_SPEAKER = re.compile(r"[^\W\d_][\w.'\-]{0,19}(?: [^\W\d_][\w.'\-]{0,19}){0,3}: \S")
"""A line that opens with who says it, in one to four words: "Caroline: ...", "Dr. Alvarez:
...", "Ben Li: ..." (not "On March 14 the service went down: ...")."""


def is_turn(kind: str, text: str) -> bool:
    """Whether an episodic entry is a conversation's turn, read beside the turns written around
    it (`sources.relevance._turn_context`): a message, or a text that opens with its speaker's
    name. Episodic notes written one after another about unrelated events (an incident, a
    meeting) are not: each is ranked on its own words. A label that opens a note the way a name
    opens a turn ("Incident: ...") reads as a speaker: no rule tells the two apart without
    knowing names."""
    if kind == "message":
        return True
    # A name opens with a capital where the script has capitals ("caroline: hi" is no turn).
    return not text[:1].islower() and _SPEAKER.match(text, 0, TURN_HEAD_CHARS) is not None


MEMORULE_OWNED = (
    "is a memorule: change it with sources.update_memorule / delete_memorule, which keep its "
    "states and audit events"
)
MEMORULE_WRITE = FieldError(
    field="kind",
    code="use_remember",
    message="memorules are written with sources.remember(kind='memorule', ...), which validates "
    "them and records their audit event",
)
NEURON_WRITE = FieldError(
    field="kind",
    code="not_allowed",
    message="a neuron needs trigger phrases: write it with add_neurons or an ingest `neuron` record "
    "(docs/records.md); written as a note, no turn reads it",
)


@attrs.frozen(kw_only=True)
class Memory:
    """A stored memory."""

    id: str
    namespace: Namespace
    kind: str
    memory_type: str | None
    text: str
    created_at: str
    importance: float
    metadata: Mapping[str, Any] = attrs.field(factory=dict, eq=False)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Memory:
        """Build from an entry row (`sources.storage._engine_corpora.EntryRecord`, or its order)."""
        return cls(
            id=row[1],
            namespace=Namespace(tenant_id=row[2], project_id=row[3]),
            kind=row[4],
            memory_type=row[5],
            text=row[6],
            created_at=row[7],
            importance=float(row[8]),
            metadata=_validate.decode_metadata(row[9]),
        )


@attrs.frozen(kw_only=True)
class Recalled:
    """A memory that cleared the floor, with its score on the one calibrated scale and the
    score's parts: the task's gate in the namespace (`qpp`) and the memory's `band`."""

    memory: Memory
    score: float
    qpp: float | None = None
    band: float | None = None
    rowid: int | None = attrs.field(default=None, eq=False, repr=False)
    """The entry's rowid (its key in the turn's retrieval); None when not read with it."""
    own_score: float | None = None
    """The score of the memory's own words, when its neighbours in the conversation ranked it
    elsewhere and `score` is that rank's (`sources.relevance._turn_context`); None when `score` is its own."""


@attrs.frozen(kw_only=True)
class NewEntry:
    """One memory to write; validated as a whole before anything is written."""

    text: str
    kind: str = "note"
    memory_type: str | None = None
    id: str | None = None
    importance: float = 0.5
    created_at: str | None = None
    metadata: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class EntryRow:
    """An entry as `insert_row` writes it: validated, its id set, its metadata JSON."""

    id: str
    kind: str
    memory_type: str | None
    text: str
    created_at: str
    importance: float
    metadata: str


def entry_values(ns_id: int, namespace: Namespace, row: EntryRow) -> tuple[object, ...]:
    """An entry's row as every engine inserts it: (id, ns_id, tenant_id, project_id, kind,
    memory_type, text, created_at, importance, metadata)."""
    return (
        row.id,
        ns_id,
        namespace.tenant_id,
        namespace.project_id,
        row.kind,
        row.memory_type,
        row.text,
        row.created_at,
        row.importance,
        row.metadata,
    )


def entry_errors(entry: NewEntry) -> list[FieldError]:
    """Every problem with one memory to write (none: it would be accepted, id clashes aside)."""
    return checked_entry(entry)[1]


def content_id(text: str) -> str:
    """The id of an entry written without one: derived from its text, so the same text
    written again into a namespace finds the entry already there instead of a second copy."""
    return "txt-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def checked_entry(
    entry: NewEntry, prefix: str = "", *, dedupe: bool = True
) -> tuple[EntryRow | None, list[FieldError]]:
    errors = _validate.text_errors(f"{prefix}text", entry.text)
    errors += _validate.choice_errors(f"{prefix}kind", entry.kind, _validate.KINDS, optional=False)
    errors += _validate.choice_errors(f"{prefix}memory_type", entry.memory_type, MEMORY_TYPES, optional=True)
    errors += _validate.id_errors(f"{prefix}id", entry.id)
    created, errs = _validate.normalise_created_at(entry.created_at)
    metadata, more = _validate.encode_metadata(entry.metadata)
    errors += _validate.prefixed([*_validate.importance_errors(entry.importance), *errs, *more], prefix)
    if errors or created is None:
        return None, errors
    return (
        EntryRow(
            id=entry.id or (content_id(entry.text) if dedupe else str(uuid.uuid4())),
            kind=entry.kind,
            memory_type=entry.memory_type,
            text=entry.text,
            created_at=created,
            importance=float(entry.importance),
            metadata=metadata,
        ),
        [],
    )


def types_errors(types: Iterable[str] | None) -> list[FieldError]:
    """Unknown memory types in a typed query."""
    if types is None:
        return []
    return [
        FieldError(field="types", code="invalid_choice", message=f"unknown memory type {t!r}")
        for t in types
        if t not in MEMORY_TYPES
    ]


class RecallOptions(TypedDict, total=False):
    """`MemoryStore.recall`'s options."""

    types: Sequence[str] | None
    limit: int
    min_score: float
    mode: str | None
