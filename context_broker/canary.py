"""`python -m context_broker.canary`: the acceptance invariants, end to end, on a throwaway store.

Bootstraps itself in a temporary directory (temporary HOME and XDG dirs, lexical recall so
no model is loaded, outbound network refused), writes memories, neurons, past tasks and an
active task, assembles real turns through the default sources plus a failing one, and
checks: a trivial task gets zero memories; importance alone never injects; TaskState
supremacy (a past task's text never displaces or outranks the active task block, and recall
ignores it; a past task enters only when it clears the floor for the turn's task); the memory
sub-budget holds; a failing source does not fail the turn; the floor holds (a source answering
every turn with a candidate below it never gets it selected).

Every check is registered in `CHECKS` by name and every registered check runs; the test suite
pins the expected names, so a check removed here fails CI instead of passing silently.

Exits 1 with one `canary violation: ...` line per broken invariant, else prints `canary ok`.
Part of the application (`context_broker`): it wires `broker` to `sources` as the CLI does,
through `context_broker.wiring`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
import attrs
import structlog

from broker import (
    TURN_COMPLETED,
    Candidate,
    EstimatingTokenCounter,
    Namespace,
    SelectionResult,
    Turn,
    open_broker,
)
from broker.testing import FailingSource, FakeSource, RecordingSelector
from context_broker.wiring import open_default_selector, open_store, sample_lines
from sources import MemoryStore, NewEntry, SqliteTaskRepository, Writers

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from broker import Context, ContextBroker

NS = Namespace(tenant_id="canary", project_id="invariants")
ACTIVE = "Plan the Postgres upgrade of the billing database cluster"
TRIVIAL = "what time is it"
PAST = "Rotate the expiring Kafka broker TLS certificates"
PAST_REPLY = "Rotated the Kafka broker TLS certificates; keystores reloaded without downtime."
RELATED_PAST = "Plan the Postgres upgrade of the reporting database replica"
RELATED_REPLY = "The reporting replica upgrade plan used pg_upgrade with a rehearsal on a restored backup."

ACTIVE_MEMORIES = (
    (
        "pg-1",
        "The plan for any Postgres upgrade of the billing database cluster starts with a replica rehearsal.",
    ),
    ("pg-2", "Upgrade plan: the billing database cluster moves to Postgres 16 with pg_upgrade in link mode."),
    ("pg-3", "The billing database cluster runs Postgres 13; its upgrade plan needs a tested base backup."),
)
PAST_ONLY_MEMORIES = (
    ("kafka-1", "Expiring Kafka broker TLS certificates are rotated with the keystore script every 90 days."),
    (
        "kafka-2",
        "To rotate the Kafka broker TLS certificates before they expire, restart every broker in turn.",
    ),
)
NEURON_ID = "neuron-vip"
NEURON_TEXT = "The chief executive insists on teal dashboards in every quarterly review."
NEURON_TRIGGERS = ("quarterly review colours", "teal dashboard theme")
BUDGET_FILLER = 12
"""Long, relevant memories written to overflow the memory sub-budget."""
_FILLER_DETAIL = (
    (
        "freeze schema migrations, announce the maintenance window to finance, confirm the on-call "
        "rota, and record the current replication lag of every standby before touching anything."
    ),
    (
        "snapshot the volumes, verify the snapshot restores on a scratch host, compare row counts of "
        "the invoices and ledger tables, and keep the restore log attached to the change ticket."
    ),
    (
        "run the extension compatibility report, rebuild any indexes flagged by amcheck, and rehearse "
        "the switchover twice on staging with production-sized data and synthetic traffic."
    ),
    (
        "after cut-over, watch error rates, slow queries and autovacuum for an hour, then release the "
        "freeze and write the post-change note with timings and anything that surprised us."
    ),
)
SMALL_WINDOW = 1600
"""A window whose default memory budget (200 tokens) the filler must overflow."""
DOCUMENTED_FLOOR = 0.42
"""The one floor as documented, written here on purpose: the canary pins it."""
BELOW_FLOOR_SOURCE = "canary-below-floor"
BELOW_FLOOR_ID = "below-floor"
BELOW_FLOOR_SCORE = 0.2
"""The score of a candidate offered on every turn: relevant-looking text, calibrated below the
floor, so the floor alone stands between it and the context."""
BELOW_FLOOR_TEXT = "The Postgres upgrade plan of the billing database cluster might need a new logo."


@contextlib.contextmanager
def _sandbox() -> Iterator[Path]:
    """Give the run a temporary HOME and data dirs, and refuse outbound network."""
    keys = ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "CONTEXT_BROKER_DB")
    saved = {k: os.environ.get(k) for k in keys}
    connect = socket.socket.connect

    def refuse(*_args: object, **_kw: object) -> None:
        raise OSError("the canary runs without network")

    with tempfile.TemporaryDirectory(prefix="context-broker-canary-") as tmp:
        root = Path(tmp)
        for key, sub in zip(keys[:4], ("home", "data", "config", "cache"), strict=True):
            (root / sub).mkdir()
            os.environ[key] = str(root / sub)
        os.environ["CONTEXT_BROKER_DB"] = str(root / "data" / "memory.db")
        socket.socket.connect = refuse  # type: ignore[method-assign]
        try:
            yield root
        finally:
            socket.socket.connect = connect  # type: ignore[method-assign]
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _open_store(path: Path) -> MemoryStore:
    return open_store(path, mode="lexical")  # no model: the canary runs anywhere


def _background() -> list[NewEntry]:
    """The bundled sample notes: a store of varied topics, as real stores are (term
    statistics of a store holding only the canary's few memories would be degenerate)."""
    records = [json.loads(line) for _, line in sample_lines()]
    return [
        NewEntry(id=f"bg-{r['id']}", text=r["text"], memory_type=r.get("memory_type"))
        for r in records
        if r.get("kind") == "note"
    ]


def _seed(store: MemoryStore, repo: SqliteTaskRepository) -> None:
    store.add_entries(_background(), namespace=NS)
    for entry_id, text in ACTIVE_MEMORIES + PAST_ONLY_MEMORIES:
        store.add_entry(text, namespace=NS, id=entry_id, memory_type="semantic")
    for i in range(BUDGET_FILLER):
        store.add_entry(
            f"Step {i} of the Postgres upgrade plan for the billing database cluster: "
            + _FILLER_DETAIL[i % len(_FILLER_DETAIL)],
            namespace=NS,
            id=f"filler-{i}",
            memory_type="procedural",
        )
    Writers.for_store(store).neurons.add_neuron(
        NEURON_TEXT, namespace=NS, triggers=NEURON_TRIGGERS, importance=1.0, id=NEURON_ID
    )
    repo.create_task(PAST, namespace=NS, task_id="past")
    repo.append_turn("past", "user", PAST, namespace=NS)
    repo.append_turn("past", "assistant", PAST_REPLY, namespace=NS)
    repo.set_status("past", "completed", namespace=NS)
    repo.create_task(RELATED_PAST, namespace=NS, task_id="past-pg")
    repo.append_turn("past-pg", "user", f"{RELATED_PAST}; ignore the billing cluster", namespace=NS)
    repo.append_turn("past-pg", "assistant", RELATED_REPLY, namespace=NS)
    repo.set_status("past-pg", "completed", namespace=NS)
    repo.create_task(ACTIVE, namespace=NS, task_id="active")
    repo.create_task(TRIVIAL, namespace=NS, task_id="trivial")


def _ids(ctx: Context, *, kind: str = "memory") -> set[str]:
    seen = [*ctx.trace["blocks"], *ctx.trace["dropped"]]
    return {str(b.get("entry_id")) for b in seen if b["kind"] == kind}


def _memory_blocks(ctx: Context) -> list[Any]:
    return [b for b in ctx.blocks if b.kind == "memory"]


class _Checks:
    """Collects violations instead of stopping at the first, and the checks that ran."""

    def __init__(self) -> None:
        self.violations: list[str] = []
        self.ran: list[str] = []

    def expect(self, ok: bool, message: str) -> None:
        if not ok:
            self.violations.append(message)


@attrs.frozen(kw_only=True)
class Observed:
    """What the canary's turns produced, for the checks to judge."""

    contexts: Mapping[str, Context]
    keys: tuple[str, ...]
    """The task text each selection was keyed on, in turn order."""
    past: SelectionResult
    """A selection for the past task's own text (self-check: its memories are recallable)."""
    completed_events: int


@attrs.frozen(kw_only=True)
class Report:
    """The outcome of a canary run: the violations, and the names of the checks that ran."""

    violations: tuple[str, ...]
    ran: tuple[str, ...]


Check: TypeAlias = "Callable[[_Checks, Observed], None]"
CHECKS: dict[str, Check] = {}
"""Every canary check by name, in the order they run."""


def check(name: str) -> Callable[[Check], Check]:
    """Register a check under `name` (each name once)."""

    def register(fn: Check) -> Check:
        if name in CHECKS:
            raise ValueError(f"canary check {name!r} registered twice")
        CHECKS[name] = fn
        return fn

    return register


@check("past-task-memories-recallable")
def _check_self(c: _Checks, o: Observed) -> None:
    found = {b.entry_id for b in o.past.blocks}
    c.expect(
        {i for i, _ in PAST_ONLY_MEMORIES} <= found,
        "self-check: the past task's own memories are not recallable, so supremacy is untested",
    )


@check("one-trace-event-per-turn")
def _check_events(c: _Checks, o: Observed) -> None:
    c.expect(
        o.completed_events == len(o.contexts),
        f"{o.completed_events} turn.completed events for {len(o.contexts)} turns",
    )


@check("recall-keyed-on-the-active-task")
def _check_keys(c: _Checks, o: Observed) -> None:
    expected = (ACTIVE, TRIVIAL, ACTIVE, ACTIVE)
    c.expect(o.keys == expected, f"recall was keyed on {list(o.keys)!r}, not only on each turn's active task")


@check("trivial-task-abstains")
def _check_trivial(c: _Checks, o: Observed) -> None:
    ctx = o.contexts["trivial"]
    c.expect(not _memory_blocks(ctx), f"trivial task got {len(_memory_blocks(ctx))} memories, expected 0")
    c.expect(ctx.trace["memory_abstained"] is True, "trivial task: trace does not say memory_abstained")
    c.expect(not _ids(ctx, kind="history"), "trivial task got past tasks: a past task must clear the floor")


@check("importance-never-injects")
def _check_importance(c: _Checks, o: Observed) -> None:
    for name, ctx in o.contexts.items():
        c.expect(
            NEURON_ID not in _ids(ctx),
            f"importance fallback is alive: neuron {NEURON_ID} (importance 1.0, no trigger match) "
            f"reached the {name} turn",
        )


@check("task-state-supremacy")
def _check_supremacy(c: _Checks, o: Observed) -> None:
    ctx, tight = o.contexts["active"], o.contexts["tight"]
    last = ctx.blocks[-1] if ctx.blocks else None
    c.expect(last is not None and last.kind == "task", "the active task block is not the last block")
    c.expect(ctx.trace["blocks"][-1].get("entry_id") == "active", "trace: active task is not the last block")
    history = _ids(ctx, kind="history")
    c.expect("past-pg" in history, "the completed past task relevant to the active task is missing")
    c.expect("past" not in history, "a completed past task unrelated to the active task was injected")
    leaked = _ids(ctx) & {i for i, _ in PAST_ONLY_MEMORIES}
    c.expect(not leaked, f"recall followed past-task text: {sorted(leaked)} selected for the active task")
    c.expect(bool(_ids(ctx) & {i for i, _ in ACTIVE_MEMORIES}), "recall found nothing for the active task")
    kinds = [b.kind for b in tight.blocks]
    c.expect("task" in kinds, "under a tight input budget the active task block was dropped")
    c.expect("history" not in kinds, "under a tight input budget history outlived its budget")
    dropped = {d.get("entry_id"): d["reason"] for d in tight.trace["dropped"]}
    c.expect(dropped.get("past-pg") == "input budget", "history was not dropped with reason `input budget`")


@check("memory-sub-budget")
def _check_budget(c: _Checks, o: Observed) -> None:
    ctx = o.contexts["small-window"]
    budget = min(1200, SMALL_WINDOW // 8)  # the documented default, computed here on purpose
    counted = sum(EstimatingTokenCounter().count(b.text) for b in _memory_blocks(ctx))
    c.expect(counted <= budget, f"memory sub-budget broken: {counted} tokens > {budget}")
    c.expect(ctx.trace["memory_budget"] == budget, f"trace: memory_budget is not {budget}")
    c.expect(ctx.trace["memory_tokens"] <= budget, "trace: memory_tokens above memory_budget")
    reasons = {d["reason"] for d in ctx.trace["dropped"] if d["kind"] == "memory"}
    c.expect("memory budget" in reasons, "the memory budget was never exercised (nothing dropped for it)")


@check("failing-source-is-data")
def _check_failing_source(c: _Checks, o: Observed) -> None:
    ctx = o.contexts["active"]
    statuses = {s["name"]: s["status"] for s in ctx.trace["sources"]}
    c.expect(statuses.get("canary-failing") == "failed", f"failing source not reported failed: {statuses}")
    c.expect(bool(_memory_blocks(ctx)), "a failing source emptied the turn")


@check("floor-holds")
def _check_floor(c: _Checks, o: Observed) -> None:
    for name, ctx in o.contexts.items():
        offered = {s["name"]: s.get("candidates", 0) for s in ctx.trace["sources"]}
        c.expect(
            offered.get(BELOW_FLOOR_SOURCE, 0) >= 1,
            f"self-check: no below-floor candidate was offered in the {name} turn: the floor is untested",
        )
        c.expect(
            BELOW_FLOOR_ID not in _ids(ctx),
            f"floor broken: {BELOW_FLOOR_ID} (score {BELOW_FLOOR_SCORE} < floor {DOCUMENTED_FLOOR}) "
            f"was selected in the {name} turn",
        )
        c.expect(
            ctx.trace["floor"] == DOCUMENTED_FLOOR,
            f"trace: floor is {ctx.trace['floor']}, not the documented {DOCUMENTED_FLOOR}",
        )


def _below_floor_source() -> FakeSource:
    """A source answering every turn with one relevant-looking candidate scored below the floor."""
    candidate = Candidate(
        entry_id=BELOW_FLOOR_ID,
        source=BELOW_FLOOR_SOURCE,
        score=BELOW_FLOOR_SCORE,
        text=BELOW_FLOOR_TEXT,
        memory_type="semantic",
    )
    source = FakeSource(BELOW_FLOOR_SOURCE)
    source.candidates = (candidate,)  # the converter's type (tuple) is not one mypy can check
    return source


async def _turns(broker: ContextBroker) -> dict[str, Context]:
    active = await broker.assemble(Turn(task_id="active", namespace=NS, window=128_000, input_budget=8000))
    task_tokens = next(b.tokens for b in active.blocks if b.kind == "task")
    return {
        "trivial": await broker.assemble(
            Turn(task_id="trivial", namespace=NS, window=128_000, input_budget=8000)
        ),
        "active": active,
        "tight": await broker.assemble(
            Turn(task_id="active", namespace=NS, window=128_000, input_budget=task_tokens + 10)
        ),
        "small-window": await broker.assemble(
            Turn(task_id="active", namespace=NS, window=SMALL_WINDOW, input_budget=8000)
        ),
    }


async def _observe(root: Path) -> Observed:
    store = await anyio.to_thread.run_sync(_open_store, root / "data" / "memory.db")
    try:
        repo = SqliteTaskRepository.from_store(store)
        await anyio.to_thread.run_sync(_seed, store, repo)
        extra = [FailingSource("canary-failing"), _below_floor_source()]
        with structlog.testing.capture_logs() as events:
            async with (
                open_default_selector(store, deadline=5.0, extra_sources=extra) as selector,
                open_broker(
                    selector=(recorder := RecordingSelector(selector)), tasks=repo, conversations=repo
                ) as broker,
            ):
                contexts = await _turns(broker)
                past = await selector.select_for_task(PAST, namespace=NS)
    finally:
        store.close()
    return Observed(
        contexts=contexts,
        keys=tuple(r.task for r in recorder.requests),
        past=past,
        completed_events=sum(1 for e in events if e.get("event") == TURN_COMPLETED),
    )


async def _run(root: Path) -> Report:
    observed = await _observe(root)
    c = _Checks()
    for name, run_check in CHECKS.items():
        c.ran.append(name)
        run_check(c, observed)
    return Report(violations=tuple(c.violations), ran=tuple(c.ran))


def run() -> Report:
    """Run every registered check on a throwaway store; the report of what ran and failed."""
    with _sandbox() as root, structlog.testing.capture_logs():
        return anyio.run(_run, root, backend="trio")


def main() -> int:
    """Run the canary; 0 when every invariant holds."""
    violations = run().violations
    for v in violations:
        print(f"canary violation: {v}", file=sys.stderr)
    if violations:
        return 1
    print("canary ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
