"""What each MCP tool does, given its type-checked arguments and the caller's namespace.

Every handler calls the same library function as the matching CLI command, so bad values
raise the same `ValidationError` field errors. The namespace is never an argument: the
transport decides it (the server's own over stdio, the bearer token's over HTTP).
"""

from __future__ import annotations

import functools
import inspect
import math
import os
from typing import TYPE_CHECKING, Any

import attrs

from broker import FieldError, MemorySelector, Namespace, SessionContext, Turn, ValidationError, count_errors
from context_broker.shapes import recall_row, result_json
from context_broker.wiring import ENV_PERSONA
from sources import (
    MAX_RECALL_LIMIT,
    WriterSession,
    audit_events,
    delete_memorule,
    memorule_history,
    remember,
    remember_errors,
    semantic_recall,
    session_errors,
    update_memorule,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from broker import Context
    from context_broker._services import Services

Args = dict[str, Any]

MEMORULE_FIELDS = ("memorule_kind", "subject", "body", "applies_to", "evidence_signal_id", "confidence")
_SESSION_CONTEXT = ("persona", "surface", "specialization", "scope")

# LEAD (issue 12): the one place `message` is wired. It is passed on only to what accepts
# it: `Turn(message=...)` once Turn has the field, `select_for_task(message=...)` likewise.
_TURN_TAKES_MESSAGE = "message" in attrs.fields_dict(Turn)
_SELECT_TAKES_MESSAGE = "message" in inspect.signature(MemorySelector.select_for_task).parameters


def _message(args: Mapping[str, Any], *, accepted: bool) -> dict[str, Any]:
    return {"message": args["message"]} if accepted and "message" in args else {}


def _writer_session(s: Services, args: Mapping[str, Any]) -> WriterSession:
    """The writer of a memorule write: `persona` (else `$CONTEXT_BROKER_PERSONA`; one is
    required) and `session_id` (else the server's own, one per server run)."""
    persona = args.get("persona") or os.environ.get(ENV_PERSONA) or None
    if persona is None:
        raise ValidationError.single(
            "persona", "required", f"a memorule write names its writer: give persona or set ${ENV_PERSONA}"
        )
    session = WriterSession(session_id=args.get("session_id", s.session_id), persona=persona)
    errors = session_errors(session)
    if errors:
        raise ValidationError(errors)
    return session


def _note_writer(args: Mapping[str, Any]) -> None:
    """A note has no writer: a writer field given with one is refused."""
    given = [f for f in ("session_id", "persona") if f in args]
    if given:
        raise ValidationError(
            [
                FieldError(field=f, code="not_allowed", message="is only accepted with kind 'memorule'")
                for f in given
            ]
        )


def _session_context(args: Mapping[str, Any]) -> SessionContext | None:
    given = {k: args[k] for k in _SESSION_CONTEXT if k in args}
    return SessionContext(**given) if given else None


def _types(args: Mapping[str, Any]) -> tuple[str, ...] | None:
    return tuple(args["types"]) if "types" in args else None


# -- memories -------------------------------------------------------------------------------


async def remember_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """Write a note or a memorule (the `remember` command)."""
    fields = {
        k: args[k] for k in ("kind", "text", "memory_type", "id", "importance", *MEMORULE_FIELDS) if k in args
    }
    session: WriterSession | None = None
    if args.get("kind") != "memorule":
        _note_writer(args)
    else:
        try:
            session = _writer_session(s, args)
        except ValidationError as exc:  # with every other field error, as the CLI reports them
            others = [e for e in remember_errors(**fields) if e.field not in {"session_id", "persona"}]
            raise ValidationError([*others, *exc.errors]) from exc
    memory_id = await s.run(functools.partial(remember, s.store, namespace=ns, session=session, **fields))
    return {"id": memory_id}


async def recall_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """What clears the floor for a query (`semantic_recall`; the `recall --json` rows)."""
    options: dict[str, Any] = {k: args[k] for k in ("mode", "source_type") if k in args}
    if "limit" in args:
        _validate_limit(args["limit"])
        options["top_k"] = args["limit"]
    matches = await s.run(
        functools.partial(
            semantic_recall,
            s.store,
            args["query"],
            namespace=ns,
            types=_types(args),
            context=_session_context(args),
            **options,
        )
    )
    return {"memories": [recall_row(m) for m in matches]}


def _validate_limit(limit: int) -> None:
    errors = count_errors("limit", limit, maximum=MAX_RECALL_LIMIT)
    if errors:
        raise ValidationError(errors)


async def select_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """The selector's result for a task (the `select --json` shape)."""
    _raise_all(_deadline_errors(args))
    options: dict[str, Any] = {k: args[k] for k in ("budget", "mode") if k in args}
    if "deadline_ms" in args:
        options["deadline"] = args["deadline_ms"] / 1000.0
    result = await s.selector.select_for_task(
        args["task"],
        namespace=ns,
        types=_types(args),
        context=_session_context(args),
        **options,
        **_message(args, accepted=_SELECT_TAKES_MESSAGE),
    )
    return result_json(result)


async def assemble_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """One turn: the context text, its blocks and its trace (creates the task given as text)."""
    if ("task_id" in args) == ("task" in args):
        raise ValidationError.single("task_id", "required", "give exactly one of task_id or task")
    _raise_all(_turn_errors(args))
    task_id: str = (
        args["task_id"]
        if "task_id" in args
        else await s.run(functools.partial(s.tasks.create_task, args["task"], namespace=ns))
    )
    options: dict[str, Any] = {k: args[k] for k in ("budget", "memory_budget") if k in args}
    if "deadline_ms" in args:
        options["deadline"] = args["deadline_ms"] / 1000.0
    turn = Turn(
        task_id=task_id,
        namespace=ns,
        window=args.get("window", 128_000),
        input_budget=args.get("input_budget", 8_000),
        types=_types(args),
        context=_session_context(args),
        **options,
        **_message(args, accepted=_TURN_TAKES_MESSAGE),
    )
    return _context_json(task_id, await s.broker.assemble(turn))


def _deadline_errors(args: Args) -> list[FieldError]:
    """`deadline_ms` named as the tool's caller gave it (the library's check speaks of
    `deadline` in seconds)."""
    ms = args.get("deadline_ms")
    if ms is None or (math.isfinite(ms) and ms > 0):
        return []
    message = "must be a finite number of milliseconds > 0"
    return [FieldError(field="deadline_ms", code="invalid", message=message)]


def _turn_errors(args: Args) -> list[FieldError]:
    """Every problem with an `assemble` call's own arguments at once, before a task is created
    (the turn's checks stop at the first; task creation names the text `description`)."""
    errors = _deadline_errors(args)
    for field, least in (("window", 1), ("input_budget", 0)):  # as `Turn` takes them
        if field in args:
            errors += count_errors(field, args[field], minimum=least, maximum=None)
    if "task" in args and not str(args["task"]).strip():
        errors.append(FieldError(field="task", code="empty", message="must not be empty"))
    return errors


def _raise_all(errors: list[FieldError]) -> None:
    if errors:
        raise ValidationError(errors)


def _context_json(task_id: str, context: Context) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "text": context.text,
        "blocks": [
            {
                "name": b.name,
                "kind": b.kind,
                "tokens": b.tokens,
                "entry_id": b.entry_id,
                "score": b.score,
                "source": b.source,
            }
            for b in context.blocks
        ],
        "trace": dict(context.trace),
    }


# -- tasks ----------------------------------------------------------------------------------


async def task_create_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """Create an active task; its id is what `assemble` and the other task tools take."""
    task_id = await s.run(functools.partial(s.tasks.create_task, args["description"], namespace=ns))
    return await _task_json(s, ns, task_id)


async def task_status_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """Read a task, or set its status (active, completed, cancelled, failed) first."""
    if "status" in args:
        await s.run(functools.partial(s.tasks.set_status, args["task_id"], args["status"], namespace=ns))
    return await _task_json(s, ns, args["task_id"])


async def task_append_turn_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """Append one conversation turn to a task."""
    append = functools.partial(s.tasks.append_turn, args["task_id"], args["role"], args["text"], namespace=ns)
    await s.run(append)
    out = await _task_json(s, ns, args["task_id"])
    out["turns"] = len(await s.tasks.turns(args["task_id"], namespace=ns))
    return out


async def _task_json(s: Services, ns: Namespace, task_id: str) -> dict[str, Any]:
    task = await s.tasks.get_task(task_id, namespace=ns)
    if task is None:
        raise ValidationError.single("task_id", "unknown", f"no task {task_id!r} in {ns}")
    return attrs.asdict(task)


# -- memorules ------------------------------------------------------------------------------


async def memorule_update_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """Append a new state to a memorule (the given fields change)."""
    changed = {k: args[k] for k in MEMORULE_FIELDS if k in args}
    session = _writer_session(s, args)
    update = functools.partial(update_memorule, s.store, args["id"], namespace=ns, session=session, **changed)
    return (await s.run(update)).as_dict()


async def memorule_delete_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """Delete a memorule; its audit events stay."""
    delete = functools.partial(
        delete_memorule,
        s.store,
        args["id"],
        namespace=ns,
        session=_writer_session(s, args),
        evidence_signal_id=args.get("evidence_signal_id"),
    )
    if not await s.run(delete):
        raise _not_found(args["id"], ns)
    return {"id": args["id"], "deleted": True}


async def memorule_history_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """Every state of a memorule, oldest first."""
    states = await s.run(functools.partial(memorule_history, s.store, args["id"], namespace=ns))
    if not states:
        raise _not_found(args["id"], ns)
    return {"states": [state.as_dict() for state in states]}


async def audit_tool(s: Services, ns: Namespace, args: Args) -> dict[str, Any]:
    """The memorule audit events of the caller's tenant, oldest first."""
    events = await s.run(
        functools.partial(audit_events, s.store, since=args.get("since"), tenant=ns.tenant_id)
    )
    return {"events": [e.as_dict() for e in events]}


def _not_found(memorule_id: str, ns: Namespace) -> ValidationError:
    return ValidationError(
        [FieldError(field="id", code="not_found", message=f"no memorule {memorule_id!r} in {ns}")]
    )
