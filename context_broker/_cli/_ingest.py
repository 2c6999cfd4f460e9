"""`ingest`: load a record file (or standard input) into every source of the namespace. The
demo seeds its bundled sample through the same `ingest_lines`, so there is one record format.

Notes go in first, in one transaction (embedded in batches, with progress); then the other
records one by one in `RECORDS` order. Every line is parsed and checked before anything is
written. Ingesting a file again is idempotent: a record without an id has one derived from
its content and is found again; a record whose own id exists is an error that names `--replace`.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from broker import FieldError, Namespace, ValidationError
from sources import SqliteTaskRepository, Writers, WriterSession, memorule_history, remember, update_memorule

from ._app import App, UsageError
from ._jsonl import label, read_lines
from ._options import field_lines
from ._progress import progress
from ._records import RECORD_FIELDS, Parsed, Record, parse, record_writer
from ._session import add_writer_arguments, writer_session

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping

    from sources import Memory, MemoryStore, NewEntry

PROGRESS_MIN_NOTES = 1000
"""Below this many notes an ingest takes about a second: no progress is shown."""
RECORDS_DOC = "docs/records.md"
_REPLACE_HINT = "; use --replace to overwrite it"
_MAX_LISTED = 10


@attrs.frozen(kw_only=True)
class Report:
    """What an ingest did, line by line: written (new or replaced), or already stored."""

    written: int
    unchanged: int


@attrs.frozen(kw_only=True)
class IngestOptions:
    """How an ingest writes: the defaults are `ingest` without flags."""

    replace: bool = False
    """Overwrite records whose id exists (a memorule gets a new state, a task is rewritten)."""
    dedupe: bool = True
    """Skip a note without an id whose text the namespace holds already."""
    progress: Callable[[int, int], None] | None = None
    """Called with (done, total) while the notes are embedded."""
    writer: WriterSession | None = None
    """Who writes the memorules (required when there are any)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `ingest`."""
    p = sub.add_parser(
        "ingest",
        help="load memories and other records from a JSONL file, every line validated first",
        description="Load records, one JSON object per line: notes (the default), facts, knowledge, "
        "neurons, graph nodes and edges, memorules and tasks. Every line is checked before anything "
        f"is written. The format of each record type, with an example: {RECORDS_DOC}.",
    )
    p.add_argument(
        "file", metavar="FILE", help=f'JSONL records ("-": standard input); record types in {RECORDS_DOC}'
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="overwrite records whose id exists (a memorule gets a new state, a task is rewritten)",
    )
    p.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="store a note without an id even if the namespace holds its text already",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the counts as one JSON object (records, written, unchanged)",
    )
    add_writer_arguments(p)
    p.set_defaults(handler=ingest)


def ingest(args: argparse.Namespace, app: App) -> int:
    """Validate every line, then write; say how many records the file held, and how many were new."""
    parsed, writer = _checked(args, app)
    fresh = not _store_exists(app)
    if not parsed.notes and not parsed.records and fresh:
        raise UsageError(f"error: {label(args.file)}: no records (no store was created)")
    big = len(parsed.notes) >= PROGRESS_MIN_NOTES
    with progress("ingest") as update:
        options = IngestOptions(
            replace=args.replace,
            dedupe=not args.keep_duplicates,
            progress=update if big else None,
            writer=writer,
        )
        try:
            report = ingest_records(app.store(), app.namespace, parsed, options)
        except (UsageError, ValidationError):
            if fresh:
                _discard_if_empty(app)
            raise
    if report.written:
        app.store().refresh_statistics()  # PostgreSQL plans a freshly loaded store badly until ANALYZE
    records = report.written + report.unchanged
    if args.json:
        app.print_json(
            {
                "records": records,
                "written": report.written,
                "unchanged": report.unchanged,
                "tenant": app.namespace.tenant_id,
                "project": app.namespace.project_id,
            }
        )
    else:
        app.out(
            f"ingested {records} records into {app.namespace}: "
            f"{report.written} written, {report.unchanged} already stored"
        )
    return 0


def _discard_if_empty(app: App) -> None:
    """Remove the SQLite store this ingest created when its first record failed and nothing was
    written (no namespace): a refused file leaves no empty store behind."""
    path = app.db_path
    if not isinstance(path, Path):
        return
    with app.store().engine.read() as reader:
        if reader.namespace_ids():
            return
    app.close()
    path = path.expanduser()
    for leftover in (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
        leftover.unlink(missing_ok=True)


def _store_exists(app: App) -> bool:
    """True when the store exists already (a SQLite file; a PostgreSQL database always does)."""
    path = app.db_path
    return not isinstance(path, Path) or path.expanduser().exists()


def _checked(args: argparse.Namespace, app: App) -> tuple[Parsed, WriterSession | None]:
    """The file's records and the writer of its memorules; UsageError listing every bad line and
    a missing writer together."""
    parsed, problems = parse(read_lines(args.file))
    writer, errors = _writer(args, app, parsed)
    if problems:
        raise UsageError(
            *(f"error: {p}" for p in problems),
            *field_lines(errors, getattr(args, "field_flags", {})),
            f"error: {label(args.file)}: nothing was written",
        )
    if errors:
        raise ValidationError(errors)
    return parsed, writer


def _writer(
    args: argparse.Namespace, app: App, parsed: Parsed
) -> tuple[WriterSession | None, list[FieldError]]:
    """The writer of the file's memorules (`_session.writer_session`), or why there is none;
    (None, []) when it has no memorule that needs one."""
    if not any(r.type == "memorule" and record_writer(r.fields) is None for r in parsed.records):
        return None, []  # no memorule, or each names its writer
    return writer_session(args.session_id, args.persona, derived_id=app.session_id)


def read_records(name: str) -> Parsed:
    """Every record of a file (`-`: standard input); UsageError listing every bad line (the
    benchmarks' ingest path; `ingest` lists a missing memorule writer with them)."""
    return records_of(read_lines(name), name)


def records_of(lines: list[tuple[int, str]], name: str) -> Parsed:
    """The records of numbered lines read from `name`; UsageError listing every bad line."""
    parsed, problems = parse(lines)
    if problems:
        raise UsageError(*(f"error: {p}" for p in problems), f"error: {label(name)}: nothing was written")
    return parsed


def ingest_records(
    store: MemoryStore, namespace: Namespace, parsed: Parsed, options: IngestOptions = IngestOptions()
) -> Report:
    """Write parsed records: the notes in one transaction, then each other record."""
    written, unchanged = _write_notes(store, namespace, parsed.notes, options)
    sinks = _Sinks(
        store=store,
        writers=Writers.for_store(store),
        tasks=SqliteTaskRepository.from_store(store),
        writer=options.writer,
    )
    for record in parsed.records:
        try:
            done = _write_record(sinks, namespace, record, replace=options.replace)
        except UsageError as exc:
            if not written:
                raise
            raise UsageError(
                *exc.lines,
                f"error: the {written} {'record' if written == 1 else 'records'} written before line "
                f"{record.line} {'stays' if written == 1 else 'stay'}; "
                "fix the line and ingest again with --replace",
            ) from exc
        written, unchanged = (written + 1, unchanged) if done else (written, unchanged + 1)
    return Report(written=written, unchanged=unchanged)


def _write_notes(
    store: MemoryStore, namespace: Namespace, notes: tuple[tuple[int, NewEntry], ...], options: IngestOptions
) -> tuple[int, int]:
    if not notes:
        return 0, 0
    same = 0
    if options.replace:  # an unchanged note is not rewritten (nor embedded again)
        kept = _changed(store, namespace, notes)
        same, notes = len(notes) - len(kept), kept
        if not notes:
            return 0, same
    before = store.stats(namespace=namespace)["entries"]
    try:
        ids = store.add_entries(
            [e for _, e in notes],
            namespace=namespace,
            replace=options.replace,
            progress=options.progress,
            dedupe=options.dedupe,
        )
    except ValidationError as exc:
        raise UsageError(*_note_errors(store, namespace, notes, exc.errors)) from exc
    if options.replace:
        return len(set(ids)), len(ids) - len(set(ids)) + same
    new = int(store.stats(namespace=namespace)["entries"]) - int(before)
    return new, len(ids) - new


def _changed(
    store: MemoryStore, namespace: Namespace, notes: tuple[tuple[int, NewEntry], ...]
) -> tuple[tuple[int, NewEntry], ...]:
    """The notes `--replace` writes: all but those stored as they are (an id the file gives twice
    is refused before: `_records._repeated`)."""
    given = Counter(e.id for _, e in notes)
    stored = store.get_many([e.id for _, e in notes if e.id is not None], namespace=namespace)
    return tuple((n, e) for n, e in notes if given[e.id] > 1 or not _stored_as_is(stored, e))


def _stored_as_is(stored_by_id: Mapping[str, Memory], entry: NewEntry) -> bool:
    """Whether the namespace holds this note under its id with every field the line gives
    (a line without `created_at` keeps the stored time): `--replace` then leaves it as it is."""
    stored = None if entry.id is None else stored_by_id.get(entry.id)
    return (
        stored is not None
        and (stored.text, stored.kind, stored.memory_type) == (entry.text, entry.kind, entry.memory_type)
        and stored.importance == entry.importance
        and _json(stored.metadata) == _json(entry.metadata or {})
        and (entry.created_at is None or _same_moment(entry.created_at, stored.created_at))
    )


def _json(metadata: Mapping[str, Any]) -> str:
    """Metadata as compared: its JSON, so `true` and `1`, or `1` and `1.0`, differ."""
    return json.dumps(metadata, sort_keys=True, ensure_ascii=False)


def _same_moment(given: str, stored: str) -> bool:
    """Whether two ISO-8601 timestamps name one instant ("...Z" and "...+00:00" do; a time
    without a zone is UTC, as the store reads it)."""
    try:
        a, b = datetime.fromisoformat(given), datetime.fromisoformat(stored)
    except ValueError:
        return False
    return a.replace(tzinfo=a.tzinfo or UTC) == b.replace(tzinfo=b.tzinfo or UTC)


def _note_errors(
    store: MemoryStore,
    namespace: Namespace,
    notes: tuple[tuple[int, NewEntry], ...],
    errors: tuple[FieldError, ...],
) -> list[str]:
    """Batch errors (`[12].text`, or an existing id) as lines naming the file's line."""
    lines: list[str] = []
    listed = False
    for e in errors:
        if e.code == "exists":  # one error an id: list them once, each with its file line
            if listed:
                continue
            listed = True
            taken = [
                (number, entry.id)
                for number, entry in notes
                if entry.id is not None and store.get(entry.id, namespace=namespace) is not None
            ]
            lines += [
                f"error: line {number}: id: {id_!r} already exists in {namespace}{_REPLACE_HINT}"
                for number, id_ in taken[:_MAX_LISTED]
            ]
            if len(taken) > _MAX_LISTED:
                lines.append(f"error: {len(taken) - _MAX_LISTED} more ids exist already")
            continue
        index, _, field = e.field.removeprefix("[").partition("].")
        number, field = (notes[int(index)][0], field) if index.isdigit() else (notes[0][0], e.field)
        lines.append(f"error: line {number}: {field}: {e.message} ({e.code})")
    return lines


@attrs.frozen(kw_only=True)
class _Sinks:
    store: MemoryStore
    writers: Writers
    tasks: SqliteTaskRepository
    writer: WriterSession | None = None


def _write_record(sinks: _Sinks, namespace: Namespace, record: Record, *, replace: bool) -> bool:
    """Write one record; False when it was already stored (its content-derived id exists)."""
    fields = dict(record.fields)
    try:
        return _WRITE[record.type](sinks, namespace, fields, replace)
    except ValidationError as exc:
        exists = any(e.code == "exists" for e in exc.errors)
        if exists and record.derived_id:
            return False
        if exists:  # worded as a note's: the line's id, the namespace, the flag that overwrites
            taken = record.fields.get("id")
            raise UsageError(
                f"error: line {record.line}: id: {taken!r} already exists in {namespace}{_REPLACE_HINT}"
            ) from exc
        named = [(RECORD_FIELDS.get(e.field, e.field), e) for e in exc.errors]
        raise UsageError(
            *(f"error: line {record.line}: {f}: {e.message} ({e.code})" for f, e in named)
        ) from exc


def _fact(s: _Sinks, ns: Namespace, f: dict[str, Any], replace: bool) -> bool:
    s.writers.facts.add_fact(namespace=ns, replace=replace, **f)
    return True


def _knowledge(s: _Sinks, ns: Namespace, f: dict[str, Any], replace: bool) -> bool:
    s.writers.knowledge.add_knowledge(namespace=ns, replace=replace, **f)
    return True


def _neuron(s: _Sinks, ns: Namespace, f: dict[str, Any], replace: bool) -> bool:
    s.writers.neurons.add_neuron(namespace=ns, replace=replace, **f)
    return True


def _node(s: _Sinks, ns: Namespace, f: dict[str, Any], replace: bool) -> bool:
    s.writers.graphs.add_node(namespace=ns, replace=replace, **f)
    return True


def _edge(s: _Sinks, ns: Namespace, f: dict[str, Any], _replace: bool) -> bool:
    return s.writers.graphs.add_edge(f.pop("src"), f.pop("relation"), f.pop("dst"), namespace=ns, **f)


def _memorule(s: _Sinks, ns: Namespace, f: dict[str, Any], replace: bool) -> bool:
    """A new memorule; with `replace`, an existing one gets these fields as its next state. Its
    writer is the one the record names, else the invocation's."""
    writer = record_writer(f) or s.writer
    f.pop("written_by", None)
    try:
        remember(s.store, namespace=ns, kind="memorule", session=writer, **f)
    except ValidationError as exc:
        if not (replace and any(e.code == "exists" for e in exc.errors)):
            raise
        changes = {k: v for k, v in f.items() if k not in {"id", "memory_type", "importance"}}
        if _unchanged(s.store, ns, f["id"], changes):
            return False
        update_memorule(s.store, f["id"], namespace=ns, session=writer, **changes)
    return True


def _unchanged(store: MemoryStore, ns: Namespace, memorule_id: str, changes: dict[str, Any]) -> bool:
    """Whether the memorule's current state already holds these fields: ingesting the same file
    again with `--replace` appends no state (ingest stays idempotent)."""
    history = memorule_history(store, memorule_id, namespace=ns)
    if not history:
        return False
    current = history[-1]
    return all(v is None or getattr(current, k, None) == v for k, v in changes.items())


def _task(s: _Sinks, ns: Namespace, f: dict[str, Any], replace: bool) -> bool:
    """A task and its turns; with `replace`, an existing task of that id is rewritten."""
    if replace:
        s.tasks.delete_task(f["id"], namespace=ns)
    s.tasks.create_task(f["description"], namespace=ns, task_id=f["id"], status=f.get("status") or "active")
    for role, text in f.get("turns") or ():
        s.tasks.append_turn(f["id"], role, text, namespace=ns)
    return True


_WRITE: dict[str, Callable[[_Sinks, Namespace, dict[str, Any], bool], bool]] = {
    "fact": _fact,
    "knowledge": _knowledge,
    "neuron": _neuron,
    "node": _node,
    "edge": _edge,
    "memorule": _memorule,
    "task": _task,
}
