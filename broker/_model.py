"""Frozen values that flow through one turn: namespace, candidates, selection, outcomes."""

from __future__ import annotations

import enum
import math
import unicodedata
from collections.abc import Mapping
from typing import Any

import attrs

from ._exceptions import FieldError, ValidationError
from ._text import hidden_character

MEMORY_TYPES: tuple[str, ...] = (
    "episodic",
    "semantic",
    "procedural",
    "self",
    "personality",
    "associative",
)
"""The memory types a memory may be classified as (or left unclassified: None)."""

MEMORY_BLOCKS: tuple[str, ...] = ("memory", "persona_memories", "consolidated", "memorules", "history")
"""The context blocks a selected candidate can belong in (`history`: a past task)."""

HISTORY_BLOCK = "history"
"""The block of a past task: counted apart from memories in a selection's tallies."""

MAX_TEXT_CHARS = 32_000
"""Longest memory text, in characters: the store refuses longer writes, and the broker cuts
a longer candidate text from any source to this length at the gather boundary."""

MAX_ID_CHARS = 200
"""Longest id (of a memory, task or namespace part), in characters."""


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
    hidden = hidden_character(value)
    if hidden is not None:
        return [
            FieldError(
                field=field,
                code="invisible",
                message=f"must not contain control or invisible characters (found U+{ord(hidden):04X})",
            )
        ]
    return []


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
    if not (isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0):
        msg = f"{attribute.name} must be a probability in [0, 1], got {value!r}"
        raise ValueError(msg)


_optional_unit = attrs.validators.optional(_unit)


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
    qpp: float | None = attrs.field(default=None, validator=_optional_unit)
    band: float | None = attrs.field(default=None, validator=_optional_unit)
    rank: int | None = attrs.field(
        default=None,
        validator=attrs.validators.optional([attrs.validators.instance_of(int), attrs.validators.ge(0)]),
    )
    """The source's own order within its block (0 first), or None. When a source ranks its
    candidates (the memorules source, by confidence and session fit), the selector caps them,
    admission drops them and the context renders them in this order; the floor still applies
    to `score`."""


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


@attrs.frozen(kw_only=True)
class Tally:
    """Distinct entries the sources of a turn surfaced, and how many of them cleared the floor.

    An entry two sources returned (the store and the persona lane) counts once.
    """

    candidates: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    cleared: int = attrs.field(default=0, validator=attrs.validators.ge(0))


@attrs.frozen(kw_only=True)
class SelectionResult:
    """What the selector chose for one task, and the evidence of how."""

    blocks: tuple[SelectedBlock, ...]
    candidates_evaluated: int
    """Distinct entries (memories and past tasks) the sources returned."""
    types_queried: tuple[str, ...] | None
    sources: tuple[SourceOutcome, ...]
    mode: str = "lexical"
    qpp: float | None = None
    """The task's gate in the namespace, as the sources reported it (None: no candidate)."""
    memories: Tally | None = None
    """Distinct memories surfaced and cleared the floor (before the budget cap); None in a
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
        """Share of the distinct memories surfaced that did not clear the floor; None without any."""
        tally = self.memory_tally
        if tally.candidates == 0:
            return None
        return (tally.candidates - tally.cleared) / tally.candidates
