"""`demo` and `trace-stats`: assemble a real context from the sample memories; summarise a trace.

`demo` is the README's main job: it seeds the bundled sample data (a fictional team's
memories, neurons, facts, knowledge and past tasks) when the namespace is empty, creates
the task, assembles one turn and prints the context; its trace event goes to the log.
"""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Any

import anyio

from broker import TURN_COMPLETED, Block, Context, Turn, open_broker
from context_broker.wiring import SAMPLE_DATA, open_default_selector, sample_lines
from sources import SqliteTaskRepository

from ._app import App, UsageError
from ._ingest import IngestOptions, ingest_records, records_of
from ._jsonl import decode_problem, label, read_lines
from ._options import DEFAULT_DEADLINE_MS, PositiveInt, add_deadline_argument
from ._plot import INSTALL_HINT, plot
from ._session import add_context_arguments, session_context
from ._store_cmds import add_mode_argument

if TYPE_CHECKING:
    import argparse

    from broker import Namespace
    from sources import MemoryStore

    from ._records import Parsed

DEMO_TASK = "Prepare the Lighthouse 2.4 release checklist and release notes"
_PERCENTILES = (50, 95, 99)
EXIT_NO_EVENTS = 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `demo` and `trace-stats`."""
    p = sub.add_parser("demo", help="assemble one turn's context from the bundled sample memories")
    p.add_argument("--message", help="the task's latest user message (joins the selection query)")
    p.add_argument(
        "task", nargs="?", default=DEMO_TASK, metavar="TASK", help=f"the active task (default: {DEMO_TASK!r})"
    )
    p.add_argument(
        "--window",
        type=int,
        action=PositiveInt,
        default=128_000,
        metavar="TOKENS",
        help="model window in tokens; memories get min(1200, window // 8) of them (default 128000)",
    )
    p.add_argument(
        "--input-budget",
        type=int,
        action=PositiveInt,
        default=8000,
        metavar="TOKENS",
        help="tokens for the whole context: a count of tokens, not memories (default 8000)",
    )
    add_deadline_argument(p)
    p.add_argument("--json", action="store_true", help="print blocks and trace as one JSON object")
    add_mode_argument(p)
    add_context_arguments(p)
    p.set_defaults(handler=demo)

    t = sub.add_parser("trace-stats", help="summarise a JSONL trace log of turn.completed events")
    t.add_argument(
        "file", metavar="FILE", help='JSON lines, e.g. written with --trace-file ("-": standard input)'
    )
    t.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    t.add_argument(
        "--plot",
        metavar="PNG",
        help=f"also draw latency and score histograms, the floor marked (needs matplotlib: {INSTALL_HINT})",
    )
    t.set_defaults(handler=trace_stats)


# -- demo ---------------------------------------------------------------------------------


def demo(args: argparse.Namespace, app: App) -> int:
    """Seed the sample data if the namespace is empty, create the task, assemble, print."""
    if args.message is not None and not args.message.strip():
        raise UsageError("error: --message: must not be empty (empty)")
    store = app.store()
    namespace = app.namespace
    repo = SqliteTaskRepository.from_store(store)
    seed = store.stats(namespace=namespace)["entries"] == 0
    task_id = repo.create_task(args.task, namespace=namespace)  # a bad task fails before seeding
    if seed:
        seed_samples(store, namespace)
    turn = Turn(
        task_id=task_id,
        namespace=namespace,
        window=args.window,
        input_budget=args.input_budget,
        deadline=args.deadline_ms / 1000.0,
        message=args.message,
        context=session_context(args),
    )
    context = anyio.run(_assemble, store, repo, turn, bool(args.trace_text), backend="trio")
    if args.json:
        app.print_json({"blocks": [_block_json(b) for b in context.blocks], "trace": dict(context.trace)})
    else:
        app.out(context.text)
    return 0


async def _assemble(
    store: MemoryStore, repo: SqliteTaskRepository, turn: Turn, include_text: bool
) -> Context:
    async with (
        open_default_selector(store, deadline=turn.deadline or DEFAULT_DEADLINE_MS / 1000) as selector,
        open_broker(selector=selector, tasks=repo, conversations=repo, include_text=include_text) as broker,
    ):
        return await broker.assemble(turn)


def _block_json(block: Block) -> dict[str, Any]:
    return {
        "name": block.name,
        "kind": block.kind,
        "tokens": block.tokens,
        "entry_id": block.entry_id,
        "score": block.score,
        "text": block.text,
    }


def sample_records() -> Parsed:
    """The bundled sample (memories, neurons, facts, knowledge, memorules, past tasks), read as
    `ingest` reads."""
    return records_of(sample_lines(), SAMPLE_DATA)


def seed_samples(store: MemoryStore, namespace: Namespace) -> None:
    """Write the sample data into the namespace, through `ingest`'s own code."""
    ingest_records(store, namespace, sample_records(), IngestOptions())  # its memorules name their writer


# -- trace-stats --------------------------------------------------------------------------


def trace_stats(args: argparse.Namespace, app: App) -> int:
    """Read every turn.completed event of the file and print the summary (exit 1 if none)."""
    events = _events(args.file)
    if not events:
        sys.stderr.write(f"error: {label(args.file)}: no {TURN_COMPLETED} trace events found\n")
        return EXIT_NO_EVENTS
    summary = summarise(events)
    if args.plot:
        plot(events, args.plot, percentiles=summary["latency_ms"])
    if args.json:
        app.print_json(summary)
    else:
        for line in _human(summary):
            app.out(line)
    return 0


def _events(path: str) -> list[dict[str, Any]]:
    events = []
    for n, line in read_lines(path):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"error: {path}:{n}: not JSON ({decode_problem(exc)})") from exc
        if not isinstance(item, dict):
            raise UsageError(f"error: {path}:{n}: not a JSON object")
        if item.get("event") == TURN_COMPLETED:
            problem = _problem(item)
            if problem:
                raise UsageError(f"error: {path}:{n}: turn.completed {problem}")
            events.append(item)
    return events


def _problem(event: dict[str, Any]) -> str | None:
    timings = event.get("timings")
    total = timings.get("total_ms") if isinstance(timings, dict) else None
    if isinstance(total, bool) or not isinstance(total, int | float):
        return "has no numeric timings.total_ms"
    if not isinstance(event.get("memory_abstained", False), bool):
        return "has a non-boolean memory_abstained"
    sources = event.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, dict) and "name" in s for s in sources):
        return "has malformed sources"
    for key in ("memory_candidates", "memory_selected"):
        value = event.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"has a bad {key}"
    return None


def _percentile(values: list[float], pct: int) -> float | None:
    """Nearest-rank percentile (None when there are no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


_UNANSWERED = ("failed", "timeout", "open-circuit", "overloaded")
"""The statuses of a source that did not answer a turn (`broker.SourceStatus`): it raised, ran
past the deadline, was switched off by its circuit breaker, or had no room in its mailbox."""


def summarise(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Summarise turns: abstention and irrelevant-memory rates, latency, per-source rates."""
    turns = len(events)
    latencies = [float(e["timings"]["total_ms"]) for e in events]
    candidates = sum(int(e.get("memory_candidates", 0)) for e in events)
    selected = sum(int(e.get("memory_selected", 0)) for e in events)
    per_source: dict[str, dict[str, int]] = {}
    for e in events:
        for s in e.get("sources", []):
            counts = per_source.setdefault(str(s["name"]), dict.fromkeys(("turns", *_UNANSWERED), 0))
            counts["turns"] += 1
            if s.get("status") in _UNANSWERED:
                counts[str(s["status"])] += 1
    return {
        "turns": turns,
        "abstention_rate": _rate(sum(1 for e in events if e.get("memory_abstained") is True), turns),
        "irrelevant_memory_rate": _rate(candidates - selected, candidates),
        "latency_ms": {f"p{p}": _percentile(latencies, p) for p in _PERCENTILES},
        "sources": {
            name: {
                "turns": c["turns"],
                "failure_rate": _rate(c["failed"], c["turns"]),
                "timeout_rate": _rate(c["timeout"], c["turns"]),
                "open_circuit_rate": _rate(c["open-circuit"], c["turns"]),
                "overloaded_rate": _rate(c["overloaded"], c["turns"]),
                "unanswered_rate": _rate(sum(c[k] for k in _UNANSWERED), c["turns"]),
            }
            for name, c in sorted(per_source.items())
        },
    }


def _rate(part: int, whole: int) -> float | None:
    return None if whole == 0 else part / whole


def _fmt(value: float | None, *, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}%" if pct else f"{value:.1f}"


def _human(s: dict[str, Any]) -> list[str]:
    lat = s["latency_ms"]
    lines = [
        f"turns                   {s['turns']}",
        f"abstention rate         {_fmt(s['abstention_rate'], pct=True)}",
        f"irrelevant-memory rate  {_fmt(s['irrelevant_memory_rate'], pct=True)}",
        f"turn latency ms         p50 {_fmt(lat['p50'])}  p95 {_fmt(lat['p95'])}  p99 {_fmt(lat['p99'])}",
    ]
    for name, src in s["sources"].items():
        lines.append(
            f"source {name:<16} turns {src['turns']}  unanswered {_fmt(src['unanswered_rate'], pct=True)}"
            f" (failed {_fmt(src['failure_rate'], pct=True)}  timeout {_fmt(src['timeout_rate'], pct=True)}"
            f"  open-circuit {_fmt(src['open_circuit_rate'], pct=True)}"
            f"  overloaded {_fmt(src['overloaded_rate'], pct=True)})"
        )
    return lines
