"""`select`: what the selector would inject for a task, one task or a JSONL batch."""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import attrs

from broker import (
    MEMORY_TYPES,
    RECALL_MIN_SCORE,
    RECALL_MODES,
    MemorySelector,
    Namespace,
    SelectionResult,
    SessionContext,
    ValidationError,
    count_errors,
    printable,
    query_of,
    text_errors,
)
from context_broker.shapes import result_json
from context_broker.wiring import open_default_selector, open_store_in_thread

from ._app import App, UsageError
from ._jsonl import json_object, read_lines
from ._options import (
    NO_SOURCE_ANSWERED,
    SELECT_BUDGET,
    BudgetCount,
    add_deadline_argument,
    none_answered,
    unanswered,
)
from ._session import add_context_arguments, session_context
from ._store_cmds import add_mode_argument, parse_types, split_types

_CONTEXT_KEYS = ("persona", "surface", "specialization")
_BATCH_KEYS = frozenset({"task", "message", "tenant", "project", "types", "budget", "mode", *_CONTEXT_KEYS})


@attrs.frozen(kw_only=True)
class _Job:
    task: str
    namespace: Namespace
    types: tuple[str, ...] | None
    budget: int
    mode: str | None
    context: SessionContext | None = None
    line: int | None = None
    """The batch line's number, first in its result (None: a single task, not a batch)."""
    task_text: str | None = None
    """The batch line's own task (`task` joins its message), echoed in its result."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `select`."""
    p = sub.add_parser("select", help="select memories for a task (or a JSONL batch of tasks)")
    p.add_argument("task", nargs="?", metavar="TASK", help="the active task's description")
    p.add_argument("--message", help="the task's latest user message (joins the query, as in a turn)")
    p.add_argument(
        "--batch",
        metavar="FILE",
        help='JSONL ("-": standard input), one {"task", "tenant"?, "project"?, "types"? (list or "a,b"), '
        '"budget"?, "mode"?, "message"?, "persona"?, "surface"?, "specialization"?} per line',
    )
    p.add_argument("--types", help=f"comma-separated memory types ({','.join(MEMORY_TYPES)})")
    p.add_argument(
        "--budget",
        type=int,
        action=BudgetCount,
        default=SELECT_BUDGET,
        metavar="N",
        help=f"most memories to select: a count of memories, not tokens (1..1000; default {SELECT_BUDGET})",
    )
    add_deadline_argument(p)
    p.add_argument("--json", action="store_true", help="print the SelectionResult as one JSON object")
    add_mode_argument(p)
    add_context_arguments(p)
    p.set_defaults(handler=select)


def select(args: argparse.Namespace, app: App) -> int:
    """Run one task, or every line of a batch, in this one process."""
    if (args.task is None) == (args.batch is None):
        raise UsageError("error: select: give exactly one of TASK or --batch FILE")
    if args.batch is not None:
        jobs = _read_batch(args.batch, app, args)
        as_json = True
    else:
        # Checked here, before the store opens or any source runs, by the selector's own rules.
        errors = text_errors("task", args.task) + count_errors("budget", args.budget)
        if args.message is not None:
            errors += text_errors("message", args.message)
        if errors:
            raise ValidationError(errors)
        jobs = [
            _Job(
                task=query_of(args.task, args.message),
                namespace=app.namespace,
                types=parse_types(args.types),
                budget=args.budget,
                mode=args.mode,
                context=session_context(args),
            )
        ]
        as_json = args.json
    anyio.run(_run, jobs, app, args.deadline_ms / 1000.0, as_json, backend="trio")
    return 0


async def _run(jobs: list[_Job], app: App, deadline: float, as_json: bool) -> None:
    """Each job's result, printed as soon as it is known (a long batch streams its lines)."""
    store = await open_store_in_thread(app.db_path, mode=_store_mode(jobs, app.args.mode), create=False)
    try:
        async with open_default_selector(store, deadline=deadline) as selector:
            for job in jobs:
                result = await _one(selector, job)
                if as_json:
                    app.print_json(_echoed(job) | result_json(result))
                else:
                    _print_human(app, result)
    finally:
        store.close()


def _store_mode(jobs: list[_Job], asked: str | None) -> str | None:
    """The mode the store opens in: the command line's, but hybrid (the embedding model loaded)
    when a batch line asks for a dense mode that `--mode lexical` would leave without a model:
    its sources would each fail with a ConfigError and the line abstain."""
    if asked == "lexical" and any(job.mode not in (None, "lexical") for job in jobs):
        return "hybrid"
    return asked


def _echoed(job: _Job) -> dict[str, Any]:
    """A batch line's number and task, first in its result's JSON (nothing for a single task)."""
    return {} if job.line is None else {"line": job.line, "task": job.task_text}


async def _one(selector: MemorySelector, job: _Job) -> SelectionResult:
    return await selector.select_for_task(
        job.task,
        namespace=job.namespace,
        types=job.types,
        budget=job.budget,
        mode=job.mode,
        context=job.context,
    )


def _why(r: SelectionResult) -> str:
    """What an abstaining turn weighed: the gate it read, when it stayed under the floor, and the
    candidates its retrieval considered, below the floor included."""
    n = r.candidates_evaluated
    said = (
        [f"gate {r.qpp:.3f} < floor {RECALL_MIN_SCORE}"]
        if r.qpp is not None and r.qpp < RECALL_MIN_SCORE
        else []
    )
    said += [f"{n} candidate{'' if n == 1 else 's'} evaluated"] if n else []
    return f" ({'; '.join(said)})" if said else ""


def _print_human(app: App, r: SelectionResult) -> None:
    if not r.blocks and none_answered(str(s.status) for s in r.sources):
        app.out(NO_SOURCE_ANSWERED)
    elif r.abstained:
        app.out(f"abstained: nothing relevant{_why(r)}; `explain` shows why")
    partly = unanswered((s.name, str(s.status)) for s in r.sources)
    if partly is not None:
        app.out(partly)
    for b in r.blocks:
        app.out(
            f"{b.score:.3f}  [{b.block}/{printable(b.source)}]  {printable(b.entry_id)}  {printable(b.text)}"
        )
    app.out("sources: " + ", ".join(f"{s.name}={s.status}" for s in r.sources))


def _read_batch(name: str, app: App, args: argparse.Namespace) -> list[_Job]:
    jobs: list[_Job] = []
    errors: list[str] = []
    for number, line in read_lines(name):
        job, problems = _parse(line, app, args)
        errors += [f"error: line {number}: {p}" for p in problems]
        if job is not None:
            jobs.append(attrs.evolve(job, line=number))
    if errors:
        raise UsageError(*errors)
    return jobs


def _parse(line: str, app: App, args: argparse.Namespace) -> tuple[_Job | None, list[str]]:
    """One batch line as a job, or every problem it has (the job then None)."""
    obj, problems = json_object(line)
    if obj is None:
        return None, problems
    fields = _BatchLine.of(obj, args)
    namespace, namespace_problems = _namespace(obj, app)
    problems = fields.problems(obj) + namespace_problems
    if problems or namespace is None or not isinstance(fields.task, str):
        return None, problems
    return fields.job(namespace), []


@attrs.frozen(kw_only=True)
class _BatchLine:
    """A batch line's values, each the line's own or else the command line's, not yet checked."""

    task: Any
    message: Any
    types: Any
    budget: Any
    mode: Any
    context: dict[str, Any]

    @classmethod
    def of(cls, obj: dict[str, Any], args: argparse.Namespace) -> _BatchLine:
        return cls(
            task=obj.get("task"),
            message=obj.get("message"),
            types=_types_of(obj["types"]) if "types" in obj else parse_types(args.types),
            budget=obj.get("budget", args.budget),
            mode=obj.get("mode", args.mode),
            context={k: obj.get(k, getattr(args, k)) for k in _CONTEXT_KEYS},
        )

    def problems(self, obj: dict[str, Any]) -> list[str]:
        """Every problem of the line, in the order of its fields (unknown ones first)."""
        problems = [f"{k}: unknown field" for k in obj if k not in _BATCH_KEYS]
        if "task" in obj:
            problems += [str(e) for e in text_errors("task", self.task)]
        else:
            problems.append("task: required (the line's task text)")
        if self.message is not None:
            problems += [str(e) for e in text_errors("message", self.message)]
        types = self.types
        if types is not None and (
            not isinstance(types, list | tuple) or any(t not in MEMORY_TYPES for t in types) or not types
        ):
            problems.append(
                f"types: must be a non-empty list (or comma-separated string) of {', '.join(MEMORY_TYPES)}"
            )
        problems += [str(e) for e in count_errors("budget", self.budget)]
        if self.mode is not None and self.mode not in RECALL_MODES:
            problems.append(f"mode: must be one of {', '.join(RECALL_MODES)}")
        bad = [k for k, v in self.context.items() if v is not None and not isinstance(v, str)]
        return problems + [f"{k}: must be a string" for k in bad]

    def job(self, namespace: Namespace) -> _Job:
        """The job of a line without problems."""
        context = {k: v for k, v in self.context.items() if v is not None}
        return _Job(
            task=query_of(self.task, self.message),
            namespace=namespace,
            types=tuple(self.types) if self.types else None,
            budget=self.budget,
            mode=self.mode,
            context=SessionContext(**context) if context else None,
            task_text=self.task,
        )


def _types_of(given: object) -> object:
    """A line's `types`: a list, or a comma-separated string as `--types` takes (then a list)."""
    return list(split_types(given)) if isinstance(given, str) else given


def _namespace(obj: dict[str, Any], app: App) -> tuple[Namespace | None, list[str]]:
    """The line's namespace (the command line's tenant and project by default), or its problems."""
    try:
        namespace = Namespace(
            tenant_id=obj.get("tenant", app.args.tenant), project_id=obj.get("project", app.args.project)
        )
    except ValidationError as exc:
        return None, [f"{e.field.removesuffix('_id')}: {e.message}" for e in exc.errors]
    return namespace, []
