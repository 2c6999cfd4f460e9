from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import Block, ConfigError
from broker._admission import (
    REASON_INPUT_BUDGET,
    REASON_MEMORY_BUDGET,
    Admission,
    Admittable,
    admit,
    default_memory_budget,
    rank_key,
)

TASK = Admittable(key="user", name="user", tokens=50, priority=100, evictable=False)


def memory(key: str, tokens: int, *, priority: int = 60, score: float = 0.5) -> Admittable:
    return Admittable(key=key, name="memory", tokens=tokens, priority=priority, score=score, memory=True)


@st.composite
def turns(draw: st.DrawFn) -> tuple[list[Admittable], int, int]:
    n = draw(st.integers(0, 25))
    blocks = [
        Admittable(
            key=f"b{i}",
            name=draw(st.sampled_from(["memory", "persona_memories", "consolidated", "history"])),
            tokens=draw(st.integers(0, 400)),
            priority=draw(st.sampled_from([30, 50, 60, 70, 80])),
            score=draw(st.floats(0, 1)),
            memory=draw(st.booleans()),
            rank=draw(st.none() | st.integers(0, 10)),
        )
        for i in range(n)
    ]
    task = Admittable(
        key="user", name="user", tokens=draw(st.integers(0, 3000)), priority=100, evictable=False
    )
    blocks.insert(draw(st.integers(0, n)), task)
    return blocks, draw(st.integers(0, 2000)), draw(st.integers(0, 5000))


def _ranks(blocks: list[Admittable]) -> dict[str, tuple[int, bool, int, float, int]]:
    return {b.key: rank_key(b, i) for i, b in enumerate(blocks)}


@settings(max_examples=300)
@given(turns())
def test_admitted_memory_tokens_never_exceed_the_memory_budget(case):
    """The memory sub-budget (bounded by the input budget) always holds."""
    blocks, memory_budget, input_budget = case
    result = admit(blocks, memory_budget=memory_budget, input_budget=input_budget)
    assert result.memory_tokens <= min(memory_budget, input_budget)


@settings(max_examples=300)
@given(turns())
def test_total_stays_within_the_input_budget_unless_the_task_alone_passes_it(case):
    """Only the non-evictable active task may push a context past the input budget."""
    blocks, memory_budget, input_budget = case
    result = admit(blocks, memory_budget=memory_budget, input_budget=input_budget)
    task_tokens = next(b.tokens for b in blocks if b.key == "user")
    if task_tokens <= input_budget:
        assert result.total_tokens <= input_budget
        assert not result.task_over_budget
    else:
        assert result.task_over_budget
        assert result.total_tokens == task_tokens


@settings(max_examples=300)
@given(turns())
def test_the_active_task_block_always_survives(case):
    """Whatever the budgets, the active task block is admitted."""
    blocks, memory_budget, input_budget = case
    result = admit(blocks, memory_budget=memory_budget, input_budget=input_budget)
    assert "user" in {b.key for b in result.admitted}
    assert "user" not in {d.block.key for d in result.dropped}


@settings(max_examples=300)
@given(turns())
def test_drops_happen_in_priority_order(case):
    """Every block dropped for a budget ranks below every block that budget let in."""
    blocks, memory_budget, input_budget = case
    result = admit(blocks, memory_budget=memory_budget, input_budget=input_budget)
    rank = _ranks(blocks)
    admitted = [b for b in result.admitted if b.evictable]
    for dropped in result.dropped:
        competing = [b for b in admitted if b.memory] if dropped.reason == REASON_MEMORY_BUDGET else admitted
        assert all(rank[b.key] < rank[dropped.block.key] for b in competing)


@settings(max_examples=300)
@given(turns())
def test_every_block_is_either_admitted_or_dropped_once(case):
    """Admission loses nothing and duplicates nothing; admitted blocks keep their input order."""
    blocks, memory_budget, input_budget = case
    result = admit(blocks, memory_budget=memory_budget, input_budget=input_budget)
    keys = [b.key for b in result.admitted] + [d.block.key for d in result.dropped]
    assert sorted(keys) == sorted(b.key for b in blocks)
    assert [b.key for b in result.admitted] == [
        b.key for b in blocks if b.key in set(keys[: len(result.admitted)])
    ]


def test_lowest_score_memory_is_dropped_first_with_memory_budget_reason():
    """Within one priority, the lowest-scoring memory goes first, labelled `memory budget`."""
    blocks = [TASK, memory("a", 40, score=0.9), memory("b", 40, score=0.5), memory("c", 40, score=0.7)]
    result = admit(blocks, memory_budget=80, input_budget=10_000)
    assert [b.key for b in result.admitted] == ["user", "a", "c"]
    assert [(d.block.key, d.reason) for d in result.dropped] == [("b", REASON_MEMORY_BUDGET)]


def test_ranked_memorules_are_dropped_lowest_rank_first_whatever_their_score():
    """Memorules carry their source's rank: the lowest-ranked goes first, even if it scores best."""
    rules = [
        Admittable(key=k, name="memorules", tokens=40, priority=80, score=s, memory=True, rank=r)
        for k, s, r in (("asserted", 0.95, 2), ("observed", 0.6, 0), ("inferred", 0.8, 1))
    ]
    result = admit([TASK, *rules], memory_budget=80, input_budget=10_000)
    assert [b.key for b in result.admitted] == ["user", "observed", "inferred"]
    assert [(d.block.key, d.reason) for d in result.dropped] == [("asserted", REASON_MEMORY_BUDGET)]


def test_lower_block_priority_is_dropped_before_a_higher_score():
    """Block priority outranks score: a persona memory at 0.5 beats a plain memory at 0.99."""
    blocks = [
        TASK,
        memory("plain", 40, priority=60, score=0.99),
        memory("persona", 40, priority=70, score=0.5),
    ]
    result = admit(blocks, memory_budget=40, input_budget=10_000)
    assert [b.key for b in result.admitted] == ["user", "persona"]
    assert result.dropped[0].block.key == "plain"


def test_no_smaller_memory_slips_past_a_dropped_better_one():
    """Once the best remaining memory does not fit, nothing ranked below it is admitted."""
    blocks = [TASK, memory("big", 100, score=0.9), memory("small", 5, score=0.5)]
    result = admit(blocks, memory_budget=50, input_budget=10_000)
    assert [b.key for b in result.admitted] == ["user"]
    assert [d.block.key for d in result.dropped] == ["big", "small"]


def test_input_budget_drops_after_the_task_takes_its_share():
    """Blocks past the input budget are dropped with reason `input budget`."""
    history = Admittable(key="h1", name="history", tokens=30, priority=30)
    blocks = [memory("a", 40), history, TASK]
    result = admit(blocks, memory_budget=1000, input_budget=100)
    assert [b.key for b in result.admitted] == ["a", "user"]
    assert [(d.block.key, d.reason) for d in result.dropped] == [("h1", REASON_INPUT_BUDGET)]


def test_task_alone_over_budget_is_kept_and_flagged():
    """An active task larger than the whole input budget is still admitted, and flagged."""
    result = admit([TASK, memory("a", 1)], memory_budget=10, input_budget=20)
    assert [b.key for b in result.admitted] == ["user"]
    assert result.task_over_budget
    assert result.dropped[0].reason == REASON_INPUT_BUDGET


def test_memory_budget_is_bounded_by_the_input_budget():
    """The reported memory budget never exceeds the input budget."""
    result = admit([TASK], memory_budget=1200, input_budget=300)
    assert isinstance(result, Admission)
    assert result.memory_budget == 300


@pytest.mark.parametrize(("window", "expected"), [(128_000, 1200), (8192, 1024), (4000, 500), (7, 0)])
def test_default_memory_budget_is_an_eighth_of_the_window_capped_at_1200(window, expected):
    """`min(1200, window // 8)`."""
    assert default_memory_budget(window) == expected


def test_bad_budgets_and_repeated_keys_are_config_errors():
    """Negative budgets and repeated keys are rejected before any decision."""
    with pytest.raises(ConfigError, match="memory_budget"):
        admit([TASK], memory_budget=-1, input_budget=10)
    with pytest.raises(ConfigError, match="repeated"):
        admit([TASK, TASK], memory_budget=1, input_budget=10)


def test_admission_returns_the_blocks_it_was_given():
    """Rendered blocks go in and the same blocks come out, admitted or dropped: nothing to join by key."""
    task = Block(name="user", text="task", tokens=50, entry_id="t")
    rules = [
        Block(name="memorules", text=k, tokens=40, entry_id=k, score=s, rank=r)
        for k, s, r in (("asserted", 0.95, 2), ("observed", 0.6, 0))
    ]
    past = Block(name="history", text="past", tokens=30, entry_id="h", score=0.9)
    result = admit([*rules, past, task], memory_budget=40, input_budget=100)
    assert result.admitted == (rules[1], task)
    assert [(d.block, d.reason) for d in result.dropped] == [
        (rules[0], REASON_MEMORY_BUDGET),
        (past, REASON_INPUT_BUDGET),
    ]
