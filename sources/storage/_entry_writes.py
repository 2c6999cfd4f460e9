"""Entries in a write: the rows a batch writes (validated, a text given twice without an id
written once), room for their ids (an id the namespace holds is refused, or, when the write
replaces, deleted first; a memorule's never: it has its own writes), and their rows and index
terms in the caller's transaction. `MemoryStore.add_entries` is the front."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from broker import FieldError, Namespace, ValidationError

from . import _index, _validate
from ._engine import CORPUS_ENTRIES
from ._entries import (
    MEMORULE_OWNED,
    MEMORULE_WRITE,
    NEURON_WRITE,
    EntryRow,
    NewEntry,
    checked_entry,
    content_id,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._engine import Reader, Writer


def clear_ids(conn: Writer, ns_id: int, ns: Namespace, ids: Sequence[str], *, replace: bool) -> None:
    """Make room for entries `ids` in the caller's write: the ids the namespace holds are a
    ValidationError each unless `replace` (a memorule's always), else deleted everywhere."""
    old = conn.entries.find_many(ns_id, ids) if ids else {}
    if not replace:
        _validate.raise_if(_validate.exists_errors([i for i in ids if i in old], ns))
    if any(kind == "memorule" for _, kind in old.values()):
        raise ValidationError.single("id", "is_memorule", MEMORULE_OWNED)
    for rowid, _ in old.values():
        conn.entries.delete(ns_id, rowid)


def batch_rows(entries: list[NewEntry], *, dedupe: bool) -> tuple[list[EntryRow], list[str]]:
    """The rows to write (a text repeated without an id: once) and every entry's id, in order."""
    rows: list[EntryRow] = []
    ids: list[str] = []
    errors: list[FieldError] = []
    many = len(entries) > 1
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        row, errs = checked_entry(entry, f"[{i}]." if many else "", dedupe=dedupe)
        errors += errs
        if entry.kind == "memorule":  # they need their state and audit event
            errors.append(attrs.evolve(MEMORULE_WRITE, field=f"[{i}].kind" if many else "kind"))
        if entry.kind == "neuron":  # they need their triggers (`add_neurons`)
            errors.append(attrs.evolve(NEURON_WRITE, field=f"[{i}].kind" if many else "kind"))
        if row is not None:
            ids.append(row.id)
            if row.id in seen and entry.id is None:
                continue  # the same text again: one entry
            if row.id in seen:
                errors.append(
                    FieldError(
                        field=f"[{i}].id",
                        code="duplicate",
                        message=f"id {row.id!r} repeats in this batch",
                    )
                )
            seen.add(row.id)
            rows.append(row)
    _validate.raise_if(errors)
    return rows, ids


def derived_id(row: EntryRow) -> bool:
    """Whether the row's id is derived from its text (`content_id`): the text is its identity."""
    return row.id == content_id(row.text)


def stored_texts(conn: Reader, ns_id: int | None, rows: list[EntryRow]) -> set[str]:
    """Ids of the text-derived `rows` that the namespace already holds with that text."""
    derived = {r.id: r.text for r in rows if derived_id(r)}
    if ns_id is None or not derived:
        return set()
    return {i for i, text in conn.entries.texts(ns_id, list(derived)).items() if derived[i] == text}


def insert_rows(
    conn: Writer, ns_id: int, ns: Namespace, rows: Sequence[EntryRow], *, replace: bool
) -> list[int]:
    """Insert rows (distinct ids) and index them, in the caller's write; their rowids.

    An existing id is a ValidationError unless `replace` (never for a memorule's).
    """
    clear_ids(conn, ns_id, ns, [row.id for row in rows], replace=replace)
    rowids = conn.entries.insert_many(ns_id, ns, rows)
    _index.add_docs(conn, ns_id, CORPUS_ENTRIES, zip(rowids, (row.text for row in rows), strict=True))
    return rowids
