"""Store commands: remember, ingest, recall, stats."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from broker import MEMORY_TYPES, RECALL_MIN_SCORE, FieldError, ValidationError, printable
from sources import MAX_RECALL_LIMIT, NewEntry, Writers, entry_errors

from ._app import App, UsageError
from ._memorules import add_remember_arguments, remember_command

_INGEST_KEYS = frozenset({"id", "text", "kind", "memory_type", "created_at", "importance", "metadata"})
# Other record types load the other sources: {"record": "fact", ...}. Keys each accepts,
# and those it requires.
_RECORDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "fact": (
        frozenset({"text", "subject", "predicate", "object", "id", "created_at", "metadata"}),
        frozenset(),
    ),
    "knowledge": (
        frozenset({"text", "provenance", "id", "created_at", "metadata"}),
        frozenset({"text", "provenance"}),
    ),
    "neuron": (
        frozenset({"text", "triggers", "importance", "id", "created_at", "metadata"}),
        frozenset({"text", "triggers"}),
    ),
    "node": (frozenset({"name", "aliases", "description", "id", "created_at"}), frozenset({"name"})),
    "edge": (frozenset({"src", "relation", "dst", "created_at"}), frozenset({"src", "relation", "dst"})),
}
_PROGRESS_EVERY = 1000


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the store commands."""
    p = sub.add_parser(
        "ingest", help="load memories (and other records) from a JSONL file, every line validated first"
    )
    p.add_argument(
        "file",
        help="JSONL: one {text, id?, kind?, memory_type?, created_at?, importance?, metadata?} per line",
    )
    p.add_argument("--replace", action="store_true", help="replace memories whose id exists")
    p.set_defaults(handler=ingest)

    p = sub.add_parser("recall", help="memories relevant to a query, above the one floor")
    p.add_argument("query", metavar="QUERY", help="the text to recall memories for")
    p.add_argument("--types", help=f"comma-separated memory types ({','.join(MEMORY_TYPES)})")
    p.add_argument(
        "--limit",
        type=int,
        default=10,
        metavar="N",
        help=f"most memories to print, best first (1..{MAX_RECALL_LIMIT}, default 10)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON array")
    add_mode_argument(p)
    p.set_defaults(handler=recall)

    p = sub.add_parser("reindex", help="re-embed memories whose vector is missing or from another model")
    p.set_defaults(handler=reindex)

    p = sub.add_parser("stats", help="counts per namespace and kind")
    p.add_argument("--all", action="store_true", help="every namespace, not only --tenant/--project")
    p.set_defaults(handler=stats)

    if "remember" not in sub.choices:
        p = sub.add_parser("remember", help="write one memory (a note or a memorule); prints its id")
        add_remember_arguments(p)
        p.set_defaults(handler=remember_command)


def add_mode_argument(p: argparse.ArgumentParser) -> None:
    """--mode lexical|dense|hybrid (default: the store's)."""
    p.add_argument("--mode", choices=("lexical", "dense", "hybrid"), help="recall mode (default: hybrid)")


def parse_types(raw: str | None) -> tuple[str, ...] | None:
    """`a,b` -> ('a', 'b'); unknown types are a usage error."""
    if raw is None:
        return None
    types = tuple(t.strip() for t in raw.split(",") if t.strip())
    bad = [t for t in types if t not in MEMORY_TYPES]
    if bad or not types:
        raise UsageError(
            f"error: --types: unknown memory type(s) {', '.join(bad) or '(none given)'}; "
            f"choose from {', '.join(MEMORY_TYPES)}"
        )
    return types


def recall(args: argparse.Namespace, app: App) -> int:
    """Print what clears the floor, best first."""
    kwargs: dict[str, Any] = {}
    if args.mode:
        kwargs["mode"] = args.mode
    types = parse_types(args.types)  # before opening the store: bad input never touches a file
    hits = app.store().recall(args.query, namespace=app.namespace, types=types, limit=args.limit, **kwargs)
    rows = [
        {
            "id": h.memory.id,
            "score": round(h.score, 6),
            "text": h.memory.text,
            "memory_type": h.memory.memory_type,
            "kind": h.memory.kind,
            "created_at": h.memory.created_at,
        }
        for h in hits
    ]
    if args.json:
        app.print_json(rows)
    elif not rows:
        app.out(f"nothing relevant: no memory clears the floor ({RECALL_MIN_SCORE})")
    else:
        for r in rows:
            app.out(f"{r['score']:.3f}  {printable(str(r['id']))}  {printable(str(r['text']))}")
    return 0


def stats(args: argparse.Namespace, app: App) -> int:
    """Print counts as JSON (with the state of the vectors when the store embeds)."""
    store = app.store()
    namespace = None if args.all else app.namespace
    result = store.stats(namespace=namespace)
    if store.embedder is not None:
        result["vectors"] = store.vector_status(namespace=namespace)
    app.print_json(result)
    return 0


def reindex(_args: argparse.Namespace, app: App) -> int:
    """Re-embed stale or missing vectors of every namespace; print how many."""
    store = app.store(mode="hybrid")
    done = store.reindex(progress=_reindex_progress)
    sys.stderr.write(f"reindexed {done} texts with {store.embedder.model_id if store.embedder else '-'}\n")
    app.out(str(done))
    return 0


def _reindex_progress(done: int, total: int) -> None:
    sys.stderr.write(f"reindex: {done}/{total}\n")


def ingest(args: argparse.Namespace, app: App) -> int:
    """Validate every line, then write: memories in one transaction, then the other records."""
    entries, records = read_jsonl(Path(args.file))
    store = app.store()
    progress = _progress if len(entries) >= _PROGRESS_EVERY else None
    try:
        ids = store.add_entries(entries, namespace=app.namespace, replace=args.replace, progress=progress)
    except ValidationError as exc:
        raise UsageError(*(f"error: {_line_of(e)}: {e.message} ({e.code})" for e in exc.errors)) from exc
    written = _write_records(app, records, replace=args.replace)
    sys.stderr.write(f"ingested {len(ids)} memories and {written} other records into {app.namespace}\n")
    app.out(str(len(ids) + written))
    return 0


def _write_records(app: App, records: list[tuple[int, str, dict[str, Any]]], *, replace: bool) -> int:
    """Write fact, knowledge, neuron, node and edge records (nodes before edges)."""
    writers = Writers.for_store(app.store())
    order = {"fact": 0, "knowledge": 1, "neuron": 2, "node": 3, "edge": 4}
    ns = app.namespace
    for number, kind, obj in sorted(records, key=lambda r: (order[r[1]], r[0])):
        try:
            if kind == "fact":
                writers.facts.add_fact(namespace=ns, replace=replace, **obj)
            elif kind == "knowledge":
                writers.knowledge.add_knowledge(namespace=ns, replace=replace, **obj)
            elif kind == "neuron":
                writers.neurons.add_neuron(namespace=ns, replace=replace, **obj)
            elif kind == "node":
                writers.graphs.add_node(namespace=ns, replace=replace, **obj)
            else:
                src, relation, dst = obj.pop("src"), obj.pop("relation"), obj.pop("dst")
                writers.graphs.add_edge(src, relation, dst, namespace=ns, **obj)
        except ValidationError as exc:
            raise UsageError(
                *(f"error: line {number}: {e.field}: {e.message} ({e.code})" for e in exc.errors)
            ) from exc
    return len(records)


def _progress(done: int, total: int) -> None:
    sys.stderr.write(f"ingest: {done}/{total}\n")


def _line_of(e: FieldError) -> str:
    # Batch field names look like "[12].text"; report them as 1-based line numbers.
    if e.field.startswith("["):
        idx, _, field = e.field[1:].partition("].")
        if idx.isdigit():
            return f"line {int(idx) + 1}: {field}"
    return e.field


def read_jsonl(path: Path) -> tuple[list[NewEntry], list[tuple[int, str, dict[str, Any]]]]:
    """Parse and validate a memories file; every bad line is reported with its number."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"error: {path}: {exc}") from exc
    entries: list[NewEntry] = []
    records: list[tuple[int, str, dict[str, Any]]] = []
    errors: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        entry, record, problems = _parse_line(line)
        if entry is not None:
            problems += [f"{e.field}: {e.message} ({e.code})" for e in entry_errors(entry)]
            entries.append(entry)
        if record is not None:
            records.append((number, *record))
        errors += [f"error: line {number}: {p}" for p in problems]
    if errors:
        raise UsageError(*errors, f"error: {path}: nothing was written")
    return entries, records


def _parse_line(line: str) -> tuple[NewEntry | None, tuple[str, dict[str, Any]] | None, list[str]]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, None, [f"invalid JSON ({exc.msg})"]
    if not isinstance(obj, dict):
        return None, None, ["must be a JSON object"]
    kind = obj.pop("record", "memory")
    if kind != "memory":
        record, problems = _parse_record(kind, obj)
        return None, record, problems
    entry, problems = _parse_memory(obj)
    return entry, None, problems


def _parse_record(kind: object, obj: dict[str, Any]) -> tuple[tuple[str, dict[str, Any]] | None, list[str]]:
    if not isinstance(kind, str) or kind not in _RECORDS:
        return None, [f"record: must be one of memory, {', '.join(_RECORDS)}"]
    allowed, required = _RECORDS[kind]
    problems = [f"{k}: unknown field for a {kind} record" for k in obj if k not in allowed]
    problems += [f"{k}: required for a {kind} record" for k in sorted(required) if k not in obj]
    return (None if problems else (kind, obj)), problems


def _parse_memory(obj: dict[str, Any]) -> tuple[NewEntry | None, list[str]]:
    problems = [f"{k}: unknown field" for k in obj if k not in _INGEST_KEYS]
    if "text" not in obj:
        problems.append("text: required")
    for key in ("id", "text", "kind", "memory_type", "created_at"):
        if key in obj and obj[key] is not None and not isinstance(obj[key], str):
            problems.append(f"{key}: must be a string")
    importance = obj.get("importance", 0.5)
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        problems.append("importance: must be a number")
    if problems:
        return None, problems
    entry = NewEntry(
        text=obj["text"],
        id=obj.get("id"),
        kind=obj.get("kind") or "note",
        memory_type=obj.get("memory_type"),
        created_at=obj.get("created_at"),
        importance=float(importance),
        metadata=obj.get("metadata"),
    )
    return entry, []
