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
from typing import TYPE_CHECKING

import attrs

from ._exceptions import ConfigError

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


@attrs.frozen(kw_only=True)
class Admittable:
    """A block to admit: what it costs, how much it matters, whether it may be dropped."""

    key: str
    """Unique within one admission (e.g. `memory:<entry id>`)."""
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
class Dropped:
    """A block that did not fit, and which budget it did not fit."""

    block: Admittable
    reason: str


@attrs.frozen(kw_only=True)
class Admission:
    """The outcome: admitted blocks in their input order, dropped blocks in drop order."""

    admitted: tuple[Admittable, ...]
    dropped: tuple[Dropped, ...]
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


def rank_key(block: Admittable, position: int) -> tuple[int, bool, int, float, int]:
    """Sort key: higher priority first, then a source's rank (ranked blocks first), then
    higher score, then earlier arrival."""
    return order_key(priority=block.priority, rank=block.rank, score=block.score, position=position)


def order_key(
    *, priority: int, rank: int | None, score: float, position: int
) -> tuple[int, bool, int, float, int]:
    """`rank_key` from its parts, for whoever orders blocks as admission does before they are built."""
    return (-priority, rank is None, 0 if rank is None else rank, -score, position)


def admit(blocks: Iterable[Admittable], *, memory_budget: int, input_budget: int) -> Admission:
    """Admit blocks under both budgets (tokens); see the module docstring for the rules.

    The memory budget is bounded by the input budget. Raises ConfigError on a negative
    budget or a repeated key.
    """
    items = tuple(blocks)
    _check(items, memory_budget, input_budget)
    memory_budget = min(memory_budget, input_budget)
    order = {b.key: i for i, b in enumerate(items)}
    ranked = sorted(items, key=lambda b: rank_key(b, order[b.key]))

    fixed = [b for b in ranked if not b.evictable]
    fixed_tokens = sum(b.tokens for b in fixed)
    memories = [b for b in ranked if b.evictable and b.memory]
    kept_memories, memory_drops = _prefix(memories, memory_budget, REASON_MEMORY_BUDGET)

    survivors = set(kept_memories)
    evictable = [b for b in ranked if b.evictable and (not b.memory or b.key in survivors)]
    room = max(0, input_budget - fixed_tokens)
    kept, input_drops = _prefix(evictable, room, REASON_INPUT_BUDGET)

    admitted = {b.key for b in fixed} | set(kept)
    return Admission(
        admitted=tuple(b for b in items if b.key in admitted),
        dropped=memory_drops + input_drops,
        memory_budget=memory_budget,
        input_budget=input_budget,
        task_over_budget=fixed_tokens > input_budget,
    )


def _prefix(ranked: Sequence[Admittable], budget: int, reason: str) -> tuple[list[str], tuple[Dropped, ...]]:
    """Keys of the longest ranked prefix within `budget`; the rest dropped with `reason`."""
    used = 0
    for i, block in enumerate(ranked):
        if used + block.tokens > budget:
            return [b.key for b in ranked[:i]], tuple(Dropped(block=b, reason=reason) for b in ranked[i:])
        used += block.tokens
    return [b.key for b in ranked], ()


def _check(items: Sequence[Admittable], memory_budget: int, input_budget: int) -> None:
    problems = [
        f"{label} must be an integer >= 0, got {value!r}"
        for label, value in (("memory_budget", memory_budget), ("input_budget", input_budget))
        if isinstance(value, bool) or not isinstance(value, int) or value < 0
    ]
    repeated = sorted(k for k, n in collections.Counter(b.key for b in items).items() if n > 1)
    if repeated:
        problems.append(f"repeated block keys: {', '.join(repeated)}")
    if problems:
        raise ConfigError("; ".join(problems))
