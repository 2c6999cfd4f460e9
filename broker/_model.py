"""Frozen values that flow through one turn, in its order: the `Turn` a host asks for, the
`TurnRequest` every step of it reads (one absolute deadline, one resolved mode), the
`Candidate`s sources propose, the `SelectionResult` the selector returns, and the `Context`
of rendered `Block`s with its typed trace."""

from __future__ import annotations

import enum
import math
import unicodedata
import uuid
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._blocks import BLOCKS, HISTORY_BLOCK, MEMORY_BLOCKS, BlockSpec
from ._exceptions import FieldError, ValidationError
from ._fields import (
    MAX_ID_CHARS,
    MODE,
    NON_EMPTY,
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY,
    SECONDS,
    all_of,
    count_errors,
    invisible_errors,
    text_errors,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._trace import TurnTrace
    from .abc import ConversationTurn, TaskRecord

MEMORY_TYPES: tuple[str, ...] = (
    "episodic",
    "semantic",
    "procedural",
    "self",
    "personality",
    "associative",
)
"""The memory types a memory may be classified as (or left unclassified: None)."""

DEFAULT_MODE = "lexical"
"""The recall mode of a selector whose call, options and sources name none."""

DEFAULT_SELECT_BUDGET = 20
"""Most memories a turn asks of the selector; the token budgets then trim further."""


def _ns_clean(value: object) -> object:
    """NFKC and trimmed: `acme`, `acme `, its full-width spelling and NFD forms are one tenant."""
    return unicodedata.normalize("NFKC", value).strip() if isinstance(value, str) else value


def _ns_errors(field: str, value: object) -> list[FieldError]:
    if not isinstance(value, str):
        return [FieldError(field=field, code="type", message="must be a string")]
    if not value:
        return [FieldError(field=field, code="empty", message="must be a non-empty string")]
    if len(value) > MAX_ID_CHARS:
        message = f"must be at most {MAX_ID_CHARS} characters"
        return [FieldError(field=field, code="too_long", message=message)]
    return invisible_errors(field, value)


@attrs.frozen(kw_only=True)
class Namespace:
    r"""A hard partition of memory: every read and write names one.

    Each part is normalised (NFKC, trimmed), so look-alike spellings of one name are one
    namespace; a part that is empty, longer than 200 characters, or holds a control or
    invisible character (`a\u200bcme`) raises ValidationError (a ValueError).
    """

    tenant_id: str = attrs.field(converter=_ns_clean)
    project_id: str = attrs.field(default="default", converter=_ns_clean)

    def __attrs_post_init__(self) -> None:
        errors = _ns_errors("tenant_id", self.tenant_id) + _ns_errors("project_id", self.project_id)
        if errors:
            raise ValidationError(errors)

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.project_id}"


@attrs.frozen(kw_only=True)
class SessionContext:
    """Who is asking: persona, surface and specialization of the session, and its scope."""

    persona: str | None = None
    surface: str | None = None
    specialization: str | None = None
    scope: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The keys that are set, as a plain dict."""
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}


def _unit(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    # A plain ValueError: a source that builds a bad candidate fails with it, as it always has.
    if isinstance(value, float) and 0.0 <= value <= 1.0:  # the common case, without the rule
        return
    if not PROBABILITY.holds(value):
        msg = f"{attribute.name} must be a probability in [0, 1], got {value!r}"
        raise ValueError(msg)


optional_unit = attrs.validators.optional(_unit)
"""None, or a probability in [0, 1] (a candidate's and an answer's `qpp` and `band`)."""


@attrs.frozen(kw_only=True)
class Candidate:
    """One memory a source proposes, scored on the one calibrated scale.

    `score` = `qpp` x `band` when the source reports the parts: the task's gate in the
    namespace and the memory's standing in the task's evidence band.
    """

    entry_id: str
    source: str
    score: float = attrs.field(validator=_unit)
    text: str
    block: str = attrs.field(default="memory", validator=attrs.validators.in_(MEMORY_BLOCKS))
    memory_type: str | None = None
    created_at: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, eq=False)
    qpp: float | None = attrs.field(default=None, validator=optional_unit)
    band: float | None = attrs.field(default=None, validator=optional_unit)
    rank: int | None = attrs.field(
        default=None,
        validator=attrs.validators.optional([attrs.validators.instance_of(int), attrs.validators.ge(0)]),
    )
    """The source's own order within its block (0 first), or None. When a source ranks its
    candidates (the memorules source, by confidence and session fit), the selector caps them,
    admission drops them and the context renders them in this order; the floor still applies
    to `score`."""
    retrieval_key: Hashable | None = attrs.field(default=None, eq=False, repr=False)
    """The memory's key among those its source considered (`SourceAnswer.considered`), when
    the candidate is one of them; None otherwise. The trace counts a memory once whether a
    source returned it, considered it, or both."""


@attrs.frozen(kw_only=True)
class SelectedBlock:
    """A selected memory: the best candidate for its entry id, with every source that found it."""

    entry_id: str
    source: str
    sources: tuple[str, ...]
    block: str
    score: float
    memory_type: str | None
    text: str
    created_at: str | None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, eq=False)
    qpp: float | None = None
    band: float | None = None
    rank: int | None = None

    @classmethod
    def from_candidate(cls, c: Candidate, sources: tuple[str, ...]) -> SelectedBlock:
        """Promote the winning candidate of an entry id."""
        return cls(
            entry_id=c.entry_id,
            source=c.source,
            sources=sources,
            block=c.block,
            score=c.score,
            memory_type=c.memory_type,
            text=c.text,
            created_at=c.created_at,
            metadata=c.metadata,
            qpp=c.qpp,
            band=c.band,
            rank=c.rank,
        )


class SourceStatus(enum.StrEnum):
    """How one source fared in one turn."""

    OK = "ok"
    EMPTY = "empty"
    FAILED = "failed"
    TIMEOUT = "timeout"
    OVERLOADED = "overloaded"
    OPEN_CIRCUIT = "open-circuit"


@attrs.frozen(kw_only=True)
class SourceOutcome:
    """One source's part in one turn: status, latency, how many candidates it returned."""

    name: str
    status: SourceStatus
    latency_ms: float
    candidates: int = 0
    error: str | None = None
    considered: frozenset[Hashable] = attrs.field(factory=frozenset, eq=False, repr=False)
    """Keys of the memories the source considered (`SourceAnswer.considered`): empty unless it
    answered in time with them."""
    qpp: float | None = attrs.field(default=None, eq=False, repr=False)
    """The task's gate the source read (`SourceAnswer.qpp`): None unless it answered in time
    with it."""


@attrs.frozen(kw_only=True)
class Tally:
    """Distinct entries the sources of a turn considered, and how many of them cleared the floor.

    An entry two sources returned (the store and the persona lane) counts once; so does one a
    source returned and the turn's shared retrieval considered (`Candidate.retrieval_key`).
    Below-floor entries are counted, never selected: measurement, not injection.
    """

    candidates: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    cleared: int = attrs.field(default=0, validator=attrs.validators.ge(0))


@attrs.frozen(kw_only=True)
class SelectionResult:
    """What the selector chose for one task, and the evidence of how."""

    blocks: tuple[SelectedBlock, ...]
    candidates_evaluated: int
    """Distinct entries (memories and past tasks) the sources returned or considered."""
    types_queried: tuple[str, ...] | None
    sources: tuple[SourceOutcome, ...]
    mode: str = DEFAULT_MODE
    qpp: float | None = None
    """The task's gate in the namespace, as the sources reported it: on their candidates, or on
    their answers when the gate kept every memory out (None: no source reported one)."""
    memories: Tally | None = None
    """Distinct memories considered and cleared the floor (before the budget cap); None in a
    result built by hand, when `candidates_evaluated` and the selected blocks stand in."""
    history: Tally = attrs.field(factory=Tally)
    """Distinct past tasks surfaced and cleared the floor (before the budget cap)."""
    queued_ms: float = 0.0
    """How long the turn waited in line for a place before its sources were asked."""

    @property
    def selected_count(self) -> int:
        """How many memories were selected."""
        return len(self.blocks)

    @property
    def abstained(self) -> bool:
        """True iff nothing was selected."""
        return not self.blocks

    @property
    def memory_tally(self) -> Tally:
        """The memories' tally (past tasks apart), counted by the selector or from the blocks."""
        if self.memories is not None:
            return self.memories
        selected = sum(1 for b in self.blocks if b.block != HISTORY_BLOCK)
        return Tally(candidates=max(self.candidates_evaluated, selected), cleared=selected)

    @property
    def irrelevant_memory_rate(self) -> float | None:
        """Share of the distinct memories considered that did not clear the floor; None without any."""
        tally = self.memory_tally
        if tally.candidates == 0:
            return None
        return (tally.candidates - tally.cleared) / tally.candidates


def _type_names(value: object) -> object:
    """Types as a tuple without repeats; anything else as given, for `types_errors` to refuse."""
    if value is None or isinstance(value, str | bytes):
        return value
    try:
        return tuple(dict.fromkeys(value))  # type: ignore[call-overload]
    except TypeError:
        return value


def types_errors(types: object) -> list[FieldError]:
    """Problems with a `types` filter: None, or a non-empty list of `MEMORY_TYPES`."""
    if types is None:
        return []
    if not isinstance(types, tuple):
        return [FieldError(field="types", code="type", message="must be a list of type names")]
    if not types:
        return [FieldError(field="types", code="empty", message="must name at least one type")]
    unknown = [t for t in types if t not in MEMORY_TYPES]
    if unknown:
        message = f"unknown {', '.join(map(repr, unknown))}; known: {', '.join(MEMORY_TYPES)}"
        return [FieldError(field="types", code="unknown", message=message)]
    return []


def _known_types(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    errors = types_errors(value)
    if errors:
        raise ValidationError(errors)


def _namespace_errors(value: object) -> list[FieldError]:
    if isinstance(value, Namespace):
        return []
    return [FieldError(field="namespace", code="type", message="must be a Namespace")]


_CLOCK_TIME = all_of(
    attrs.validators.not_(attrs.validators.instance_of(bool)),
    attrs.validators.instance_of((int, float)),
    attrs.validators.ge(-math.inf),
)


def _clock_time(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    try:
        _CLOCK_TIME(instance, attribute, value)
    except (TypeError, ValueError):
        raise ValidationError.single(
            attribute.name, "range", "must be a time on the event loop's clock"
        ) from None


@attrs.frozen(kw_only=True)
class TurnRequest:
    """One memory selection as every step of a turn reads it: what to select for, where, which
    types, how many, for whom, until when and in which recall mode.

    `deadline` is absolute, on the event loop's clock (`anyio.current_time()`), computed once
    when the turn starts: the task read, every source and the history read stop at it. `mode`
    is resolved: the caller's, else the selector's (`MemorySelector.mode`). Invalid fields
    raise one ValidationError naming every one.
    """

    task: str
    """The query: the active task's description, and its latest user message if any."""
    namespace: Namespace
    deadline: float = attrs.field(validator=_clock_time)
    mode: str = DEFAULT_MODE
    types: tuple[str, ...] | None = attrs.field(default=None, converter=_type_names)
    budget: int = 10
    """Most memories to select."""
    context: SessionContext | None = None

    def __attrs_post_init__(self) -> None:
        errors = [
            *text_errors("task", self.task),
            *_namespace_errors(self.namespace),
            *count_errors("budget", self.budget),
            *MODE.errors("mode", self.mode),
            *types_errors(self.types),
        ]
        if errors:
            raise ValidationError(errors)


def _new_turn_id() -> str:
    return str(uuid.uuid4())


@attrs.frozen(kw_only=True)
class Turn:
    """One turn to assemble: which task, where, for which model window and input budget."""

    task_id: str = attrs.field(validator=NON_EMPTY)
    namespace: Namespace = attrs.field(validator=attrs.validators.instance_of(Namespace))
    window: int = attrs.field(validator=POSITIVE)
    """The model's context window, in tokens."""
    input_budget: int = attrs.field(validator=NON_NEGATIVE)
    """Tokens the whole assembled context may take."""
    context: SessionContext | None = None
    message: str | None = attrs.field(default=None, validator=attrs.validators.optional(NON_EMPTY))
    """The active task's latest user message: with it the selection follows the conversation."""
    types: tuple[str, ...] | None = attrs.field(default=None, converter=_type_names, validator=_known_types)
    budget: int = attrs.field(default=DEFAULT_SELECT_BUDGET, validator=POSITIVE)
    """Most memories to select (before the token budgets)."""
    deadline: float | None = attrs.field(default=None, validator=attrs.validators.optional(SECONDS))
    """Seconds from the start of `assemble` until the task read, memory selection and the
    history read are cut; None = the selector's deadline (`MemorySelector.deadline`)."""
    memory_budget: int | None = attrs.field(default=None, validator=attrs.validators.optional(NON_NEGATIVE))
    """Tokens for memory blocks; None = the broker's setting, else min(1200, window // 8)."""
    turn_id: str = attrs.field(factory=_new_turn_id)


@attrs.frozen(kw_only=True)
class PastTask:
    """A completed task the selection found relevant, with its conversation, for the history block."""

    task: TaskRecord
    turns: tuple[ConversationTurn, ...]
    selected: SelectedBlock


def _spec_kind(block: Block) -> str:
    spec = BLOCKS.get(block.name)
    return "" if spec is None else spec.kind  # an unknown name fails its own validator


@attrs.frozen(kw_only=True)
class Block:
    """One rendered block of the context; its name is a row of the block table (`_blocks`)."""

    name: str = attrs.field(validator=attrs.validators.in_(BLOCKS))
    kind: str = attrs.field(default=attrs.Factory(_spec_kind, takes_self=True))
    text: str = attrs.field(repr=False)
    tokens: int
    entry_id: str | None = None
    score: float | None = None
    band: float | None = None
    source: str | None = None
    rank: int | None = None
    """The source's own order within the block (memorules), which the context follows."""

    @property
    def spec(self) -> BlockSpec:
        """The block's row of the table: priority, order, tag."""
        return BLOCKS[self.name]

    @property
    def priority(self) -> int:
        """Admission keeps higher priorities first."""
        return self.spec.priority

    @property
    def memory(self) -> bool:
        """True when it counts against the memory budget."""
        return self.spec.memory

    @property
    def evictable(self) -> bool:
        """False for the active task."""
        return self.spec.evictable


def context_order(blocks: Iterable[Block]) -> tuple[Block, ...]:
    """Blocks in the table's order (memory groups, history, the active task last); within a
    block a source's rank (memorules) first, then the best score."""
    return tuple(sorted(blocks, key=lambda b: (b.spec.order, b.rank is None, b.rank or 0, -(b.score or 0.0))))


@attrs.frozen(kw_only=True)
class Context:
    """The assembled context of one turn, and its trace (read as the `turn.completed` fields)."""

    blocks: tuple[Block, ...]
    trace: TurnTrace = attrs.field(repr=False)

    @property
    def text(self) -> str:
        """The blocks joined by blank lines, in order."""
        return "\n\n".join(b.text for b in self.blocks)
