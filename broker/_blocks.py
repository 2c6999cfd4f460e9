"""The one table of context blocks: from it admission takes each block's priority, the context
its order, rendering its tag and the trace its kind.

    name              kind     priority  order  tag
    persona_memories  memory         70      0  memory
    memorules         memory         80      1  memory
    memory            memory         60      2  memory
    consolidated      memory         50      3  memory
    history           history        30      4  past-task
    user              task          100      5  (none: the ACTIVE TASK header)

The active task outranks every memory and every memory outranks history, so budgets drop
history first; the active task comes LAST, so the one instruction to follow is the freshest
thing the model reads, and nothing recalled or past comes after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

KIND_MEMORY = "memory"
"""A recalled memory: counts against the memory budget."""
KIND_HISTORY = "history"
"""A completed past task and its conversation."""
KIND_TASK = "task"
"""The active task: never dropped."""

MEMORULES = "memorules"
"""The block of the rules a session wrote (the trace lists their ids)."""
HISTORY_BLOCK = "history"
"""The block of a past task: counted apart from memories in a selection's tallies."""
TASK_BLOCK = "user"
"""The block of the active task."""


@attrs.frozen(kw_only=True)
class BlockSpec:
    """One kind of block: how much it matters, where it goes, how it is tagged."""

    name: str
    kind: str = attrs.field(validator=attrs.validators.in_((KIND_MEMORY, KIND_HISTORY, KIND_TASK)))
    priority: int
    """Admission keeps higher priorities first."""
    order: int
    """Place in the context, lowest first."""
    tag: str | None
    """The name of the quoting tag its text is rendered in (None: no tag)."""

    @property
    def memory(self) -> bool:
        """True when it counts against the memory budget."""
        return self.kind == KIND_MEMORY

    @property
    def evictable(self) -> bool:
        """False for the active task, which no budget drops."""
        return self.kind != KIND_TASK


MEMORY_TAG = "memory"
PAST_TASK_TAG = "past-task"

_TABLE = (
    BlockSpec(name="memory", kind=KIND_MEMORY, priority=60, order=2, tag=MEMORY_TAG),
    BlockSpec(name="persona_memories", kind=KIND_MEMORY, priority=70, order=0, tag=MEMORY_TAG),
    BlockSpec(name="consolidated", kind=KIND_MEMORY, priority=50, order=3, tag=MEMORY_TAG),
    BlockSpec(name=MEMORULES, kind=KIND_MEMORY, priority=80, order=1, tag=MEMORY_TAG),
    BlockSpec(name=HISTORY_BLOCK, kind=KIND_HISTORY, priority=30, order=4, tag=PAST_TASK_TAG),
    BlockSpec(name=TASK_BLOCK, kind=KIND_TASK, priority=100, order=5, tag=None),
)

BLOCKS: Mapping[str, BlockSpec] = MappingProxyType({spec.name: spec for spec in _TABLE})
"""Every block by name."""

MEMORY_BLOCKS: tuple[str, ...] = tuple(s.name for s in _TABLE if s.kind != KIND_TASK)
"""The context blocks a selected candidate can belong in (`history`: a past task)."""


def spec(name: str) -> BlockSpec:
    """The spec of a block name; KeyError for a name not in the table."""
    return BLOCKS[name]
