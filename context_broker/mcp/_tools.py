"""The MCP tools: one table of name, description, inputs and handler, from which the server
lists its tools and checks and runs every call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from broker import MEMORY_TYPES, Namespace
from sources import CONFIDENCE_LEVELS, MEMORULE_KINDS, RECALL_MODES, REMEMBER_KINDS, SOURCE_TYPES

from . import _handlers as h
from ._fields import Field

if TYPE_CHECKING:
    from context_broker._services import Services

Handler = Callable[["Services", Namespace, dict[str, Any]], Awaitable[dict[str, Any]]]

_TYPES = Field(
    name="types", type="strings", description=f"memory types to recall ({', '.join(MEMORY_TYPES)})"
)
_MODE = Field(name="mode", type="string", description="recall mode (default: the store's)", enum=RECALL_MODES)
_DEADLINE = Field(name="deadline_ms", type="number", description="memory selection deadline in ms")
_MESSAGE = Field(name="message", type="string", description="the user's message of this turn, if any")
_CONTEXT = tuple(
    Field(name=k, type="string", description=f"the session's {k} (memorules that apply to it are recalled)")
    for k in ("persona", "surface", "specialization", "scope")
)
_WRITER = (
    Field(name="session_id", type="string", description="the writing session (default: the server's)"),
    Field(
        name="persona",
        type="string",
        description="the writing persona (default: $CONTEXT_BROKER_PERSONA; one is required)",
    ),
)
_MEMORULE = (
    Field(name="memorule_kind", type="string", description="kind of memorule", enum=MEMORULE_KINDS),
    Field(name="subject", type="string", description="the rule in a few words (at least 4 characters)"),
    Field(name="body", type="string", description="the full text (at least 10 characters)"),
    Field(
        name="applies_to",
        type="string_map",
        description="persona, surface, specialization or scope (global, org, project, persona)",
    ),
    Field(name="confidence", type="string", description="default inferred", enum=CONFIDENCE_LEVELS),
    Field(name="evidence_signal_id", type="string", description="the signal that prompted it"),
)
_TASK_ID = Field(name="task_id", type="string", description="a task id from task_create", required=True)
_MEMORULE_ID = Field(name="id", type="string", description="the memorule's id", required=True)


@attrs.frozen(kw_only=True)
class Tool:
    """One MCP tool."""

    name: str
    description: str
    fields: tuple[Field, ...]
    handler: Handler
    read_only: bool = False


TOOLS: Mapping[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            name="remember",
            description="Write one memory: a note (text) or a memorule (kind=memorule and its fields). "
            "Returns its id.",
            fields=(
                Field(name="text", type="string", description="the note's text, or the memorule's body"),
                Field(name="kind", type="string", description="default note", enum=REMEMBER_KINDS),
                Field(name="memory_type", type="string", description="the memory's type", enum=MEMORY_TYPES),
                Field(name="id", type="string", description="the id to write under (default: a new uuid)"),
                Field(name="importance", type="number", description="in [0, 1], default 0.5"),
                *_MEMORULE,
                *_WRITER,
            ),
            handler=h.remember_tool,
        ),
        Tool(
            name="recall",
            description="Memories relevant to a query that clear the calibrated floor, best first "
            "(none when nothing is relevant). source_type memorule: memorules only, ranked by "
            "confidence and fit to the session context.",
            fields=(
                Field(name="query", type="string", description="what to recall", required=True),
                _TYPES,
                Field(name="limit", type="integer", description="most memories (default 10)"),
                _MODE,
                Field(
                    name="source_type",
                    type="string",
                    description="memory (default; memorules included) or memorule",
                    enum=SOURCE_TYPES,
                ),
                *_CONTEXT,
            ),
            handler=h.recall_tool,
            read_only=True,
        ),
        Tool(
            name="select",
            description="What the selector would inject for a task: every source asked under one "
            "deadline, one floor, true abstention.",
            fields=(
                Field(name="task", type="string", description="the task's description", required=True),
                _MESSAGE,
                _TYPES,
                Field(name="budget", type="integer", description="most memories (default 10)"),
                _MODE,
                _DEADLINE,
                *_CONTEXT,
            ),
            handler=h.select_tool,
            read_only=True,
        ),
        Tool(
            name="assemble",
            description="Assemble one turn's context for a task (task_id, or task text to create one): "
            "returns the context text to give the model, its blocks and the turn's trace.",
            fields=(
                Field(name="task_id", type="string", description="an active task's id"),
                Field(
                    name="task", type="string", description="a new task's description (instead of task_id)"
                ),
                _MESSAGE,
                Field(
                    name="window", type="integer", description="the model's window in tokens (default 128000)"
                ),
                Field(
                    name="input_budget", type="integer", description="tokens for the context (default 8000)"
                ),
                Field(
                    name="memory_budget",
                    type="integer",
                    description="tokens for memories (default min(1200, window // 8))",
                ),
                Field(name="budget", type="integer", description="most memories to select (default 20)"),
                _TYPES,
                _DEADLINE,
                *_CONTEXT,
            ),
            handler=h.assemble_tool,
        ),
        Tool(
            name="task_create",
            description="Create an active task; returns it with its id.",
            fields=(Field(name="description", type="string", description="what the task is", required=True),),
            handler=h.task_create_tool,
        ),
        Tool(
            name="task_status",
            description="Read a task, or set its status (active, completed, cancelled, failed). "
            "Completed tasks become history: past context, never instructions.",
            fields=(_TASK_ID, Field(name="status", type="string", description="the new status")),
            handler=h.task_status_tool,
        ),
        Tool(
            name="task_append_turn",
            description="Append one conversation turn (user, assistant, system or tool) to a task.",
            fields=(
                _TASK_ID,
                Field(
                    name="role", type="string", description="user, assistant, system or tool", required=True
                ),
                Field(name="text", type="string", description="the turn's text", required=True),
            ),
            handler=h.task_append_turn_tool,
        ),
        Tool(
            name="memorule_update",
            description="Append a new state to a memorule; the fields given change.",
            fields=(_MEMORULE_ID, *_MEMORULE, *_WRITER),
            handler=h.memorule_update_tool,
        ),
        Tool(
            name="memorule_delete",
            description="Delete a memorule (its audit events stay).",
            fields=(
                _MEMORULE_ID,
                Field(name="evidence_signal_id", type="string", description="the signal that prompted it"),
                *_WRITER,
            ),
            handler=h.memorule_delete_tool,
        ),
        Tool(
            name="memorule_history",
            description="Every state of a memorule, oldest first.",
            fields=(_MEMORULE_ID,),
            handler=h.memorule_history_tool,
            read_only=True,
        ),
        Tool(
            name="audit",
            description="The memorule audit events of your tenant, oldest first.",
            fields=(
                Field(name="since", type="string", description="only events at or after this ISO-8601 time"),
            ),
            handler=h.audit_tool,
            read_only=True,
        ),
    )
}
"""Every tool, by name."""
