"""`explain`: every candidate of every source for a task, and why it was or was not selected.

The sources are asked with the store's own floor lowered to 0, so below-floor memories show
too; the selector's pure steps (floor, dedupe, cap) give each candidate its fate, and one
real turn through the broker (on a transient active task, nothing written) tells which
selected blocks admission dropped. This is how a user learns why a memory did not come back.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import structlog

from broker import (
    BELOW_FLOOR,
    DEDUPLICATED,
    MEMORY_TYPES,
    RECALL_MIN_SCORE,
    SELECTED,
    Turn,
    TurnRequest,
    open_broker,
    query_of,
)
from broker.abc import TaskRecord
from context_broker.shapes import own_score
from context_broker.wiring import open_default_selector, open_store_in_thread
from sources import SqliteTaskRepository

from ._app import App, UsageError
from ._logging import EXPLAINING
from ._options import (
    NO_SOURCE_ANSWERED,
    SELECT_BUDGET,
    BudgetCount,
    PositiveInt,
    add_deadline_argument,
    none_answered,
    unanswered,
)
from ._store_cmds import add_mode_argument, parse_types

if TYPE_CHECKING:
    import argparse

    from broker import Context, Fate, MemorySelector, Namespace, SelectionResult
    from broker.abc import ConversationTurn
    from sources import MemoryStore

EXPLAIN_TASK_ID = "explain"
"""The id of the transient active task an explanation's turn runs on (never written)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `explain`."""
    p = sub.add_parser(
        "explain",
        help="every candidate of every source for a task: qpp, band, score, and why (not) selected",
    )
    p.add_argument("task", metavar="TASK", help="the active task's description")
    p.add_argument("--message", help="the task's latest user message (joins the query, as in a turn)")
    p.add_argument("--types", help=f"comma-separated memory types ({','.join(MEMORY_TYPES)})")
    p.add_argument(
        "--budget",
        type=int,
        action=BudgetCount,
        default=SELECT_BUDGET,
        metavar="N",
        help=f"most memories to select (1..1000), as `select` does (default {SELECT_BUDGET})",
    )
    p.add_argument(
        "--window",
        type=int,
        action=PositiveInt,
        default=128_000,
        metavar="TOKENS",
        help="model window in tokens (default 128000)",
    )
    p.add_argument(
        "--input-budget",
        type=int,
        action=PositiveInt,
        default=8000,
        metavar="TOKENS",
        help="tokens for the whole context (default 8000)",
    )
    add_deadline_argument(p)
    p.add_argument("--json", action="store_true", help="print the explanation as one JSON object")
    add_mode_argument(p)
    p.set_defaults(handler=explain)


def explain(args: argparse.Namespace, app: App) -> int:
    """Explain one task: print every candidate with its qpp, band, score and fate."""
    problems = []
    if not args.task.strip():
        problems.append("error: TASK: must not be empty (empty)")
    if args.message is not None and not args.message.strip():
        problems.append("error: --message: must not be empty (empty)")
    if problems:
        raise UsageError(*problems)
    report = anyio.run(_explain, args, app, backend="trio")
    if args.json:
        app.print_json(report)
    else:
        _print(app, report)
    return 0


async def _explain(args: argparse.Namespace, app: App) -> dict[str, Any]:
    store = await open_store_in_thread(app.db_path, mode=args.mode, create=False)
    try:
        # The store's own floor at 0, so below-floor memories show.
        async with open_default_selector(
            store, deadline=args.deadline_ms / 1000.0, source_floor=0.0
        ) as selector:
            query = query_of(args.task, args.message)
            request = TurnRequest(
                task=query,
                namespace=app.namespace,
                deadline=anyio.current_time() + selector.deadline,
                mode=args.mode or selector.mode,
                types=parse_types(args.types),
                budget=args.budget,
            )
            result, fates = await selector.explain(request)
            context = await _turn(selector, store, app.namespace, args)
    finally:
        store.close()
    return _report(args, result, fates, context)


async def _turn(
    selector: MemorySelector, store: MemoryStore, namespace: Namespace, args: argparse.Namespace
) -> Context:
    tasks = _Transient(SqliteTaskRepository.from_store(store), args.task)
    turn = Turn(
        task_id=EXPLAIN_TASK_ID,
        namespace=namespace,
        window=args.window,
        input_budget=args.input_budget,
        message=args.message,
        budget=args.budget,
        types=parse_types(args.types),
        deadline=args.deadline_ms / 1000.0,
    )
    async with open_broker(selector=selector, tasks=tasks, conversations=tasks) as broker:
        with structlog.contextvars.bound_contextvars(**{EXPLAINING: True}):  # not an agent's turn
            return await broker.assemble(turn)


@attrs.define
class _Transient:
    """The task repositories with one extra, unwritten active task: the one being explained."""

    inner: SqliteTaskRepository
    description: str

    async def get_task(self, task_id: str, *, namespace: Namespace) -> TaskRecord | None:
        if task_id == EXPLAIN_TASK_ID:
            now = datetime.now(UTC).isoformat()
            return TaskRecord(
                task_id=task_id, description=self.description, status="active", created_at=now, updated_at=now
            )
        return await self.inner.get_task(task_id, namespace=namespace)

    async def completed_tasks(self, *, namespace: Namespace, limit: int) -> list[TaskRecord]:
        return await self.inner.completed_tasks(namespace=namespace, limit=limit)

    async def turns(self, task_id: str, *, namespace: Namespace) -> list[ConversationTurn]:
        return await self.inner.turns(task_id, namespace=namespace)


def _report(
    args: argparse.Namespace, result: SelectionResult, fates: tuple[Fate, ...], context: Context
) -> dict[str, Any]:
    dropped = {d.get("entry_id"): d["reason"] for d in context.trace["dropped"]}
    rows: list[dict[str, Any]] = []
    for fate in sorted(fates, key=lambda f: (-f.candidate.score, f.candidate.source, f.candidate.entry_id)):
        c = fate.candidate
        outcome, detail = fate.outcome, fate.detail
        if outcome == SELECTED and c.entry_id in dropped:
            outcome, detail = "dropped at admission", dropped[c.entry_id]
        rows.append(
            {
                "source": c.source,
                "entry_id": c.entry_id,
                "block": c.block,
                "qpp": c.qpp,
                "band": c.band,
                "score": round(c.score, 6),
                "own_score": own_score(c.metadata),
                "outcome": outcome,
                "detail": detail,
                "text": c.text,
                "also_from": [],
            }
        )
    return {
        "task": args.task,
        "message": args.message,
        "mode": result.mode,
        "qpp": result.qpp,
        "floor": RECALL_MIN_SCORE,
        "budget": args.budget,
        "candidates_evaluated": result.candidates_evaluated,
        "candidates": _folded(rows),
        "sources": [
            {"name": s.name, "status": str(s.status), "candidates": s.candidates} for s in result.sources
        ],
    }


def _folded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy another source also returned (deduplicated) is not a row of its own but named in
    the kept row's `also_from`; so is a memory's second row under the floor (the first names both;
    the scale is one, so both sources scored it alike unless their queries differed, the store's
    holding the turn's message). A memory under the floor in one source and above it in another
    keeps both rows: their fates differ."""
    kept = {(r["entry_id"], r["source"]): r for r in rows if r["outcome"] != DEDUPLICATED}
    under: dict[str, dict[str, Any]] = {}  # each memory's first row under the floor
    folded = []
    for row in rows:
        winner = None
        if row["outcome"] == DEDUPLICATED:
            winner = kept.get((row["entry_id"], str(row["detail"]).removeprefix("kept from ")))
        elif row["outcome"] == BELOW_FLOOR:
            winner = under.get(row["entry_id"])
            under.setdefault(row["entry_id"], row)
        if winner is not None:
            winner["also_from"] = [*winner["also_from"], row["source"]]
            continue
        folded.append(row)
    return folded


def _number(value: float | None) -> str:
    return "  -  " if value is None else f"{value:.3f}"


def _print(app: App, report: dict[str, Any]) -> None:
    app.out(f"task: {report['task']}" + (f"  (message: {report['message']})" if report["message"] else ""))
    app.out(f"mode {report['mode']}, floor {report['floor']}, qpp {_number(report['qpp'])}")
    if not report["candidates"] and none_answered(s["status"] for s in report["sources"]):
        app.out(NO_SOURCE_ANSWERED)
    elif not report["candidates"]:
        app.out(
            "no source returned a candidate: the namespace holds no memory (of the types asked), or "
            'the task is stop words and punctuation only ("thanks!"), or in lexical mode its words '
            "are not in the namespace"
        )
    if report["candidates"]:
        app.out(
            f"considered {report['candidates_evaluated']} (memories and past tasks retrieved, the trace's "
            f"candidates_evaluated); listed: the {len(report['candidates'])} the sources returned"
        )
    partly = unanswered((s["name"], s["status"]) for s in report["sources"])
    if partly is not None:
        app.out(partly)
    for line in _table(report["candidates"]):
        app.out(line)
    app.out("sources: " + ", ".join(f"{s['name']}={s['status']}" for s in report["sources"]))


def _moved(row: dict[str, Any]) -> str:
    """How a turn's conversation context moved the memory, and the score of its own words: a
    turn whose neighbours match the task rises and takes a higher rank's score; the turns it
    passes each move down one rank and take the score of the rank they land at."""
    own = row.get("own_score")
    if own is None:
        return ""
    if row["score"] < own:
        return f"; turns raised by their neighbours stand above it (own score {own:.3f})"
    return f"; raised by its neighbours (own score {own:.3f})"


def _table(candidates: list[dict[str, Any]]) -> list[str]:
    """The candidates as aligned columns: each column as wide as its widest cell."""
    rows = [
        (
            f"{row['score']:.3f}  {_number(row['qpp'])}  {_number(row['band'])}",
            row["outcome"] + (f" ({row['detail']})" if row["detail"] else "") + _moved(row),
            "+".join([row["source"], *row["also_from"]]) + f"/{row['entry_id']}",
            " ".join(str(row["text"]).split())[:80],
        )
        for row in candidates
    ]
    fate_width = max([len("outcome"), *(len(fate) for _, fate, _, _ in rows)])
    where_width = max([len("source/entry"), *(len(where) for _, _, where, _ in rows)])
    lines = [f"score  qpp    band   {'outcome':<{fate_width}}  {'source/entry':<{where_width}}  text"]
    for numbers, fate, where, text in rows:
        lines.append(f"{numbers}  {fate:<{fate_width}}  {where:<{where_width}}  {text}")
    return lines
