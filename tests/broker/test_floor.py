"""The pure selection step: one floor, dedupe by entry id, rank, cap."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker import RECALL_MIN_SCORE, Candidate
from broker._floor import select
from broker.testing import make_candidate

candidates = st.lists(
    st.builds(
        make_candidate,
        entry_id=st.sampled_from([f"m{i}" for i in range(8)]),
        score=st.floats(min_value=0.0, max_value=1.0),
        source=st.sampled_from(["store", "neurons", "graphs", "persona"]),
    ),
    max_size=40,
)


def _above(cands: list[Candidate]) -> list[Candidate]:
    return [c for c in cands if c.score >= RECALL_MIN_SCORE]


@given(cands=candidates, budget=st.integers(min_value=1, max_value=12))
def test_nothing_below_the_floor_is_ever_selected(cands, budget):
    """Abstention is real: no candidate under the floor ever enters the context."""
    assert all(b.score >= RECALL_MIN_SCORE for b in select(cands, budget=budget))


@given(cands=candidates, budget=st.integers(min_value=1, max_value=12))
def test_cap_holds_and_nothing_relevant_is_dropped_below_it(cands, budget):
    """At most `budget` blocks, and exactly that many when enough distinct memories clear the floor."""
    blocks = select(cands, budget=budget)
    distinct = {c.entry_id for c in _above(cands)}
    assert len(blocks) == min(budget, len(distinct))


@given(cands=candidates)
def test_dedupe_keeps_highest_score_and_records_every_finder(cands):
    """One block per memory, with its best score and every source that found it above the floor."""
    blocks = select(cands, budget=100)
    assert len({b.entry_id for b in blocks}) == len(blocks)
    for block in blocks:
        mine = [c for c in _above(cands) if c.entry_id == block.entry_id]
        assert block.score == max(c.score for c in mine)
        assert block.sources == tuple(dict.fromkeys(c.source for c in mine))
        assert block.source in block.sources


@given(cands=candidates)
def test_blocks_are_ranked_best_first(cands):
    """Best first, ties broken by entry id, so the order is deterministic."""
    blocks = select(cands, budget=100)
    keys = [(-b.score, b.entry_id) for b in blocks]
    assert keys == sorted(keys)


def test_the_floor_itself_is_selected_and_just_below_is_not():
    """The floor is inclusive: a score equal to it is relevant, a hair below is not."""
    cands = [make_candidate("at", RECALL_MIN_SCORE), make_candidate("below", RECALL_MIN_SCORE - 1e-9)]
    assert [b.entry_id for b in select(cands, budget=5)] == ["at"]


def test_only_below_floor_candidates_abstain():
    """Many weak candidates still mean zero blocks: no importance-only fallback."""
    cands = [make_candidate(f"m{i}", 0.41) for i in range(20)]
    assert select(cands, budget=10) == ()
