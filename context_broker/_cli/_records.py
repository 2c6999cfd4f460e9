"""The one record format of `ingest` and the demo's sample data: a JSON object per line whose
`record` names its type (note when absent). Parsing is pure: every line is checked, every
problem reported with its line number, before anything is written.

Each type's fields are in one table (`RECORDS`), which parsing, the docs (docs/records.md)
and their test all follow. A record given no id gets one derived from its content, so
ingesting the same file again finds what it wrote instead of writing it twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from sources import (
    NewEntry,
    NewFact,
    NewNeuron,
    WriterSession,
    content_id,
    edge_errors,
    entry_errors,
    fact_errors,
    knowledge_errors,
    neuron_errors,
    node_errors,
    remember_errors,
    session_errors,
    task_errors,
)

from ._jsonl import json_object

if TYPE_CHECKING:
    from broker import FieldError

Check = Callable[[object], str | None]


def _string(value: object) -> str | None:
    return None if isinstance(value, str) else "must be a string"


def _number(value: object) -> str | None:
    return None if isinstance(value, int | float) and not isinstance(value, bool) else "must be a number"


def _object(value: object) -> str | None:
    return None if isinstance(value, dict) else "must be a JSON object"


def _strings(value: object) -> str | None:
    ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    return None if ok else "must be a list of strings"


def _turns(value: object) -> str | None:
    ok = isinstance(value, list) and all(
        isinstance(t, list) and len(t) == 2 and all(isinstance(x, str) for x in t) for t in value
    )
    return None if ok else 'must be a list of ["role", "text"] pairs'


@attrs.frozen(kw_only=True)
class RecordType:
    """The fields a record type accepts (each with its check) and those it requires."""

    fields: Mapping[str, Check]
    required: frozenset[str] = frozenset()


_COMMON = {"id": _string, "created_at": _string}
RECORDS: Mapping[str, RecordType] = {
    "note": RecordType(
        fields={
            **_COMMON,
            "text": _string,
            "kind": _string,
            "memory_type": _string,
            "importance": _number,
            "metadata": _object,
        },
        required=frozenset({"text"}),
    ),
    "fact": RecordType(
        fields={
            **_COMMON,
            "text": _string,
            "subject": _string,
            "predicate": _string,
            "object": _string,
            "metadata": _object,
        }
    ),
    "knowledge": RecordType(
        fields={**_COMMON, "text": _string, "provenance": _strings, "metadata": _object},
        required=frozenset({"text", "provenance"}),
    ),
    "neuron": RecordType(
        fields={
            **_COMMON,
            "text": _string,
            "triggers": _strings,
            "importance": _number,
            "metadata": _object,
        },
        required=frozenset({"text", "triggers"}),
    ),
    "node": RecordType(
        fields={**_COMMON, "name": _string, "aliases": _strings, "description": _string},
        required=frozenset({"name"}),
    ),
    "edge": RecordType(
        fields={"src": _string, "relation": _string, "dst": _string, "created_at": _string},
        required=frozenset({"src", "relation", "dst"}),
    ),
    "memorule": RecordType(
        fields={
            "id": _string,
            "memorule_kind": _string,
            "subject": _string,
            "body": _string,
            "applies_to": _object,
            "confidence": _string,
            "evidence_signal_id": _string,
            "memory_type": _string,
            "importance": _number,
            "written_by": _object,
        },
        required=frozenset({"memorule_kind", "subject", "body", "applies_to"}),
    ),
    "task": RecordType(
        fields={"id": _string, "description": _string, "status": _string, "turns": _turns},
        required=frozenset({"description"}),
    ),
}
"""Every record type, in the order `ingest` writes them (nodes before the edges joining them)."""


@attrs.frozen(kw_only=True)
class Record:
    """One valid line: its number, type and fields; `derived_id` when its id came from its content."""

    line: int
    type: str
    fields: Mapping[str, Any]
    derived_id: bool = False


WRITER_FIELDS = frozenset({"session_id", "persona"})
"""A memorule's writer fields: the record's `written_by`, else the `ingest` invocation's."""


def record_writer(fields: Mapping[str, Any]) -> WriterSession | None:
    """The writer a memorule record names (`"written_by": {"persona": P, "session_id": S}`), or None."""
    named = fields.get("written_by")
    if named is None:
        return None
    return WriterSession(session_id=named.get("session_id"), persona=named.get("persona"))


def _writer_problems(named: Mapping[str, Any]) -> list[str]:
    """What is wrong with a record's `written_by` object."""
    problems = [
        f"written_by.{k}: unknown field (persona, session_id)" for k in named if k not in WRITER_FIELDS
    ]
    problems += [f"written_by.{k}: required" for k in sorted(WRITER_FIELDS) if k not in named]
    if problems:
        return problems
    errors = session_errors(WriterSession(session_id=named["session_id"], persona=named["persona"]))
    return [f"written_by.{e.field}: {e.message} ({e.code})" for e in errors]


@attrs.frozen(kw_only=True)
class Parsed:
    """A file's notes (as store entries, each with its line number) and its other records."""

    notes: tuple[tuple[int, NewEntry], ...]
    records: tuple[Record, ...]


def parse(lines: list[tuple[int, str]]) -> tuple[Parsed, list[str]]:
    """Parse numbered lines; the result, and one `line N: ...` problem per bad field."""
    notes: list[tuple[int, NewEntry]] = []
    records: list[Record] = []
    problems: list[str] = []
    for number, line in lines:
        record, errors = parse_line(number, line)
        problems += [f"line {number}: {e}" for e in errors]
        if record is None:
            continue
        if record.type == "note":
            notes.append((number, _entry(record.fields)))
        else:
            records.append(record)
    given = [(r.line, r.type, str(r.fields["id"])) for r in records if r.type != "edge" and not r.derived_id]
    given += [(number, "note", entry.id) for number, entry in notes if entry.id is not None]
    problems += _repeated(given)
    records.sort(key=lambda r: (list(RECORDS).index(r.type), r.line))
    return Parsed(notes=tuple(notes), records=tuple(records)), problems


def _repeated(given: list[tuple[int, str, str]]) -> list[str]:
    """An id the file gives twice for one record type, as (line, type, id): one problem at each
    later line, found with the other problems (a note's, the store's batch would refuse only once
    every line is good)."""
    seen: dict[tuple[str, str], int] = {}
    problems = []
    for line, kind, id_ in given:
        first = seen.setdefault((kind, id_), line)
        if first != line:
            problems.append(f"line {line}: id: {id_!r} repeats line {first} (duplicate)")
    return problems


def parse_line(number: int, line: str) -> tuple[Record | None, list[str]]:
    """One line as a record, or the problems with it."""
    obj, problems = json_object(line)
    if obj is None:
        return None, problems
    kind = obj.pop("record", "note")
    spec = RECORDS.get(kind) if isinstance(kind, str) else None
    if spec is None:
        return None, [f"record: must be one of {', '.join(RECORDS)}"]
    article = "an" if kind[:1] in "aeiou" else "a"
    problems = [f"{k}: unknown field for {article} {kind} record" for k in obj if k not in spec.fields]
    problems += [
        f"{k}: required for {article} {kind} record" for k in sorted(spec.required) if obj.get(k) is None
    ]
    for key, value in obj.items():
        check = spec.fields.get(key)
        problem = check(value) if check is not None and value is not None else None
        if problem is not None:
            problems.append(f"{key}: {problem}")
    if not problems:
        problems += _deeper(kind, obj)
    if problems:
        return None, problems
    derived = kind not in {"note", "edge"} and obj.get("id") is None
    if derived:
        obj["id"] = content_id(json.dumps({"record": kind, **obj}, sort_keys=True, ensure_ascii=False))
    return Record(line=number, type=kind, fields=obj, derived_id=derived), []


def _deeper(kind: str, obj: dict[str, Any]) -> list[str]:
    """What the library's own validators say, for the types that expose them."""
    if kind == "note" and obj.get("kind") == "memorule":
        return ['kind: a memorule is a {"record": "memorule", ...} line']
    if kind == "note":
        errors = entry_errors(_entry(obj))
    elif kind == "memorule":
        # The writer is the record's `written_by`, else the invocation's (`ingest --persona`),
        # checked once by `ingest`.
        named = obj.get("written_by")
        fields = {k: v for k, v in obj.items() if k != "written_by"}
        errors = [e for e in remember_errors(kind="memorule", **fields) if e.field not in WRITER_FIELDS]
        if named is not None:
            return [f"{e.field}: {e.message} ({e.code})" for e in errors] + _writer_problems(named)
    elif kind in _RECORD_CHECKS:
        errors = _RECORD_CHECKS[kind](obj)
    else:
        return []
    return [f"{RECORD_FIELDS.get(e.field, e.field)}: {e.message} ({e.code})" for e in errors]


_RECORD_CHECKS: dict[str, Callable[[Mapping[str, Any]], list[FieldError]]] = {
    "fact": lambda o: fact_errors(NewFact(**o)),
    "knowledge": lambda o: knowledge_errors(**o),
    "neuron": lambda o: neuron_errors(NewNeuron(**o)),
    "node": lambda o: node_errors(**o),
    "edge": lambda o: edge_errors(o["src"], o["relation"], o["dst"], created_at=o.get("created_at")),
    "task": lambda o: task_errors(
        o["description"],
        task_id=o.get("id"),
        status=o.get("status") or "active",
        roles=[role for role, _ in o.get("turns") or ()],
    ),
}
"""The library's checks of the other records' values, given the fields as the line has them
(nulls too: the writer gets them so), run on every line before anything is written (an edge's
nodes, and whether an id exists, are read when it is written)."""
RECORD_FIELDS = {"src_id": "src", "dst_id": "dst", "task_id": "id"}
"""A writer's field name -> the record key a line gives it under."""


def _entry(fields: Mapping[str, Any]) -> NewEntry:
    importance = fields.get("importance")
    return NewEntry(
        text=fields["text"],
        id=fields.get("id"),
        kind=fields.get("kind") or "note",
        memory_type=fields.get("memory_type"),
        created_at=fields.get("created_at"),
        importance=0.5 if importance is None else float(importance),
        metadata=fields.get("metadata"),
    )
