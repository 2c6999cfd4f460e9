"""Pure block admission under two budgets: the memory sub-budget and the global input budget.

Blocks are ranked by priority, then score (higher first), then their order of arrival;
blocks of one priority that carry a source's own rank (the memorules) are ranked by it
first, so the lowest-ranked of them is dropped first. Admission keeps a prefix of that
ranking: once a block does not fit, it and every block ranked below it are dropped, so
drops always take the lowest-ranked first. A smaller,
lower-ranked memory never slips in past a larger, higher-ranked one that was dropped:
what the model sees is always "the best N", never a knapsack-packed surprise.

The memory sub-budget is applied first, to memory blocks only (reason `memory budget`);
then the input budget to every evictable block left (reason `input budget`), after the
non-evictable blocks took their share. Non-evictable blocks (the active task) are never
dropped, even when they alone pass the input budget; the result says so.
"""

from __future__ import annotations

import collections
from collections.abc import Hashable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import attrs

from ._exceptions import ConfigError
from ._fields import NON_NEGATIVE

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

MEMORY_BUDGET_CAP = 1200
"""Tokens: the default memory budget never exceeds this, whatever the window."""

MEMORY_WINDOW_SHARE = 8
"""The default memory budget is at most one eighth of the model's window."""

REASON_MEMORY_BUDGET = "memory budget"
REASON_INPUT_BUDGET = "input budget"


def default_memory_budget(window: int, *, cap: int = MEMORY_BUDGET_CAP) -> int:
    """`min(cap, window // 8)` tokens."""
    return max(0, min(cap, window // MEMORY_WINDOW_SHARE))


class Admissible(Hashable, Protocol):
    """What admission reads of a block: its cost, how much it matters, whether it may go.

    `broker.Block` is one (its priority and kind come from the block table); `Admittable`
    is a plain one.
    """

    @property
    def tokens(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def score(self) -> float | None: ...
    @property
    def memory(self) -> bool: ...
    @property
    def evictable(self) -> bool: ...
    @property
    def rank(self) -> int | None: ...


B = TypeVar("B", bound=Admissible)


@attrs.frozen(kw_only=True)
class Admittable:
    """A block to admit, by itself: what it costs, how much it matters, whether it may be dropped."""

    key: str
    """A label for the caller (e.g. `memory:<entry id>`)."""
    name: str
    """The block name: `user`, `memory`, `persona_memories`, `history`, ..."""
    tokens: int = attrs.field(validator=attrs.validators.ge(0))
    priority: int
    score: float = 0.0
    memory: bool = False
    """True for a memory block: it counts against the memory sub-budget."""
    evictable: bool = True
    rank: int | None = None
    """The source's own order within its block (0 first; `Candidate.rank`), or None."""


@attrs.frozen(kw_only=True)
class Dropped(Generic[B]):
    """A block that did not fit, and which budget it did not fit."""

    block: B
    reason: str


@attrs.frozen(kw_only=True)
class Admission(Generic[B]):
    """The outcome: admitted blocks in their input order, dropped blocks in drop order."""

    admitted: tuple[B, ...]
    dropped: tuple[Dropped[B], ...]
    memory_budget: int
    input_budget: int
    task_over_budget: bool
    """True when the non-evictable blocks alone pass the input budget."""

    @property
    def memory_tokens(self) -> int:
        """Tokens of the admitted memory blocks."""
        return sum(b.tokens for b in self.admitted if b.memory)

    @property
    def total_tokens(self) -> int:
        """Tokens of every admitted block."""
        return sum(b.tokens for b in self.admitted)


def rank_key(block: Admissible, position: int) -> tuple[int, bool, int, float, int]:
    """Sort key: higher priority first, then a source's rank (ranked blocks first), then
    higher score, then earlier arrival."""
    return order_key(priority=block.priority, rank=block.rank, score=block.score or 0.0, position=position)


def order_key(
    *, priority: int, rank: int | None, score: float, position: int
) -> tuple[int, bool, int, float, int]:
    """`rank_key` from its parts, for whoever orders blocks as admission does before they are built."""
    return (-priority, rank is None, 0 if rank is None else rank, -score, position)


def admit(blocks: Iterable[B], *, memory_budget: int, input_budget: int) -> Admission[B]:
    """Admit blocks under both budgets (tokens); see the module docstring for the rules.

    The memory budget is bounded by the input budget. Raises ConfigError on a negative
    budget or a block given twice.
    """
    items = tuple(blocks)
    _check(items, memory_budget, input_budget)
    memory_budget = min(memory_budget, input_budget)
    ranked = sorted(range(len(items)), key=lambda i: rank_key(items[i], i))

    fixed = [i for i in ranked if not items[i].evictable]
    fixed_tokens = sum(items[i].tokens for i in fixed)
    memories = [i for i in ranked if items[i].evictable and items[i].memory]
    kept_memories, memory_drops = _prefix(items, memories, memory_budget)

    survivors = set(kept_memories)
    evictable = [i for i in ranked if items[i].evictable and (not items[i].memory or i in survivors)]
    kept, input_drops = _prefix(items, evictable, max(0, input_budget - fixed_tokens))

    admitted = set(fixed) | set(kept)
    return Admission(
        admitted=tuple(b for i, b in enumerate(items) if i in admitted),
        dropped=(
            *(Dropped(block=items[i], reason=REASON_MEMORY_BUDGET) for i in memory_drops),
            *(Dropped(block=items[i], reason=REASON_INPUT_BUDGET) for i in input_drops),
        ),
        memory_budget=memory_budget,
        input_budget=input_budget,
        task_over_budget=fixed_tokens > input_budget,
    )


def _prefix(items: Sequence[Admissible], ranked: Sequence[int], budget: int) -> tuple[list[int], list[int]]:
    """The longest ranked prefix within `budget`, and the rest (positions in `items`)."""
    used = 0
    for n, i in enumerate(ranked):
        if used + items[i].tokens > budget:
            return list(ranked[:n]), list(ranked[n:])
        used += items[i].tokens
    return list(ranked), []


def _check(items: Sequence[Admissible], memory_budget: int, input_budget: int) -> None:
    problems = [
        *NON_NEGATIVE.problem("memory_budget", memory_budget),
        *NON_NEGATIVE.problem("input_budget", input_budget),
    ]
    if any(n > 1 for n in collections.Counter(items).values()):
        problems.append("repeated blocks: a block was given twice")
    if problems:
        raise ConfigError("; ".join(problems))
