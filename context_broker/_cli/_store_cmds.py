"""Store commands: remember, recall, reindex, stats (ingest: `_ingest`)."""

from __future__ import annotations

import argparse

from broker import MEMORY_TYPES, RECALL_MIN_SCORE, RECALL_MODES, printable
from context_broker.shapes import recall_row
from sources import MAX_RECALL_LIMIT, semantic_recall

from ._app import App, UsageError
from ._memorules import add_remember_arguments, remember_command
from ._options import int_in
from ._progress import progress
from ._session import add_context_arguments, session_context


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the store commands."""
    p = sub.add_parser("recall", help="memories relevant to a query, above the one floor")
    p.add_argument("query", metavar="QUERY", help="the text to recall memories for")
    p.add_argument("--types", help=f"comma-separated memory types ({','.join(MEMORY_TYPES)})")
    p.add_argument(
        "--limit",
        type=int,
        action=int_in(1, MAX_RECALL_LIMIT),
        default=10,
        metavar="N",
        help=f"most memories to print, best first (1..{MAX_RECALL_LIMIT}, default 10)",
    )
    p.add_argument(
        "--source-type",
        choices=("memory", "memorule"),
        default="memory",
        help="memory (default): every memory, memorules included, best first; memorule: memorules only, "
        "ranked by confidence and fit to the session context (as semantic_recall)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON array")
    add_mode_argument(p)
    add_context_arguments(p)
    p.set_defaults(handler=recall)

    p = sub.add_parser("reindex", help="re-embed memories whose vector is missing or from another model")
    p.add_argument("--json", action="store_true", help="print the count and model as one JSON object")
    p.set_defaults(handler=reindex)

    p = sub.add_parser("stats", help="counts per namespace and kind")
    p.add_argument("--all", action="store_true", help="every namespace, not only --tenant/--project")
    p.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    p.set_defaults(handler=stats)

    if "remember" not in sub.choices:
        p = sub.add_parser("remember", help="write one memory (a note or a memorule); prints its id")
        add_remember_arguments(p)
        p.set_defaults(handler=remember_command)


def add_mode_argument(p: argparse.ArgumentParser) -> None:
    """--mode lexical|dense|hybrid (default: the store's)."""
    p.add_argument("--mode", choices=RECALL_MODES, help="recall mode (default: hybrid)")


def split_types(raw: str) -> tuple[str, ...]:
    """`a, b,,c` -> ('a', 'b', 'c'): the types a comma-separated list names, unchecked."""
    return tuple(t.strip() for t in raw.split(",") if t.strip())


def parse_types(raw: str | None) -> tuple[str, ...] | None:
    """`a,b` -> ('a', 'b'); unknown types are a usage error."""
    if raw is None:
        return None
    types = split_types(raw)
    bad = [t for t in types if t not in MEMORY_TYPES]
    if bad or not types:
        raise UsageError(
            f"error: --types: unknown memory type(s) {', '.join(bad) or '(none given)'}; "
            f"choose from {', '.join(MEMORY_TYPES)}"
        )
    return types


def recall(args: argparse.Namespace, app: App) -> int:
    """Print what clears the floor: `semantic_recall`'s matches, in its order."""
    types = parse_types(args.types)  # before opening the store: bad input never touches a file
    matches = semantic_recall(
        app.store(),
        args.query,
        namespace=app.namespace,
        source_type=args.source_type,
        top_k=args.limit,
        context=session_context(args),
        mode=args.mode,
        types=types,
    )
    rows = [recall_row(m) for m in matches]
    if args.json:
        app.print_json(rows)
    elif not rows:
        app.out(f"nothing relevant: no memory clears the floor ({RECALL_MIN_SCORE})")
    else:
        for r in rows:
            where = f"[{r['source_type']}]  {printable(str(r['id']))}"
            app.out(f"{r['score']:.3f}  {where}  {printable(str(r['text']))}")
    return 0


def stats(args: argparse.Namespace, app: App) -> int:
    """Print counts (with the state of the vectors when the store embeds), as text or JSON."""
    store = app.store()
    namespace = None if args.all else app.namespace
    result = store.stats(namespace=namespace)
    if store.embedder is not None:
        result["vectors"] = store.vector_status(namespace=namespace)
    if args.json:
        app.print_json(result)
        return 0
    scope = "every namespace" if namespace is None else str(namespace)
    app.out(f"database  {result['path']} (schema v{result['schema_version']}, {result['size_bytes']} bytes)")
    app.out(f"entries   {result['entries']} in {scope}")
    for row in result["by_namespace"]:
        where = f"{row['tenant']}/{row['project']}"
        app.out(f"  {row['count']:>8}  {where}  {row['kind']}  {row['memory_type'] or '-'}")
    app.out(f"records   {sum(r['count'] for r in result['records'])} in {scope}")
    for row in result["records"]:
        app.out(f"  {row['count']:>8}  {row['tenant']}/{row['project']}  {row['kind']}")
    if "vectors" in result:
        v = result["vectors"]
        app.out(f"vectors   {v['current']} current, {v['stale']} stale, {v['missing']} missing")
    return 0


def reindex(args: argparse.Namespace, app: App) -> int:
    """Re-embed stale or missing vectors of every namespace; say how many."""
    store = app.store(mode="hybrid")
    with progress("reindex") as update:
        done = store.reindex(progress=update)
    model = store.embedder.model_id if store.embedder else None
    if args.json:
        app.print_json({"reindexed": done, "model": model})
    else:
        app.out(f"reindexed {done} texts with {model or '-'}")
    return 0
