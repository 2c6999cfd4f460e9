"""The block table: one place for each block's priority, order, tag and kind."""

from __future__ import annotations

from broker import MEMORY_BLOCKS
from broker._blocks import BLOCKS, KIND_HISTORY, KIND_MEMORY, KIND_TASK, MEMORY_TAG, PAST_TASK_TAG


def test_the_active_task_outranks_every_memory_and_every_memory_outranks_history():
    """Budgets drop history first and never the task: the priorities say so."""
    memories = [s.priority for s in BLOCKS.values() if s.kind == KIND_MEMORY]
    assert BLOCKS["user"].priority > max(memories)
    assert min(memories) > BLOCKS["history"].priority


def test_the_active_task_comes_last_and_history_after_every_memory():
    """Nothing recalled or past comes after the one instruction to follow."""
    order = sorted(BLOCKS.values(), key=lambda s: s.order)
    assert [s.kind for s in order] == [KIND_MEMORY] * 4 + [KIND_HISTORY, KIND_TASK]
    assert [s.name for s in order][:2] == ["persona_memories", "memorules"]
    assert len({s.order for s in BLOCKS.values()}) == len(BLOCKS)


def test_a_candidate_may_belong_in_every_block_but_the_task_and_is_tagged_by_its_kind():
    """`MEMORY_BLOCKS` is the table less the task; memories and past tasks each have their tag."""
    assert set(MEMORY_BLOCKS) == set(BLOCKS) - {"user"}
    assert {s.tag for s in BLOCKS.values() if s.kind == KIND_MEMORY} == {MEMORY_TAG}
    assert (BLOCKS["history"].tag, BLOCKS["user"].tag) == (PAST_TASK_TAG, None)
    assert [s.evictable for s in BLOCKS.values()].count(False) == 1
