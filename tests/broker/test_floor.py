"""The pure selection step: one floor, dedupe by entry id, rank, cap."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from broker import RECALL_MIN_SCORE, Candidate
from broker._floor import CUT_BY_BUDGET, SELECTED, fates, select, tally
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


# -- a source's own rank (memorules) --------------------------------------------------------


@st.composite
def _mixed(draw: st.DrawFn) -> list[Candidate]:
    """Unranked store memories and memorules ranked by their source (one rank per rule)."""
    plain = draw(candidates)
    n = draw(st.integers(min_value=0, max_value=8))
    ranks = draw(st.permutations(range(n)))
    rules = [
        attrs.evolve(
            make_candidate(f"r{i}", draw(st.floats(0.0, 1.0)), source="memorules", block="memorules"),
            rank=ranks[i],
        )
        for i in range(n)
    ]
    return draw(st.permutations([*plain, *rules]))


def _unranked(cands: list[Candidate]) -> list[Candidate]:
    return [attrs.evolve(c, rank=None) for c in cands]


@given(cands=_mixed(), budget=st.integers(min_value=1, max_value=12))
def test_rank_never_changes_how_many_places_a_block_gets(cands, budget):
    """A ranked block takes the places its scores earn, no more: rank reorders, never widens."""
    ranked = [b.block for b in select(cands, budget=budget)]
    by_score = [b.block for b in select(_unranked(cands), budget=budget)]
    assert ranked == by_score


@given(cands=_mixed(), budget=st.integers(min_value=1, max_value=12))
def test_ranked_candidates_are_selected_and_cut_in_their_own_order(cands, budget):
    """Memorules come in rank order, and a lower-ranked rule is never kept while a better-ranked one is cut."""
    blocks = select(cands, budget=budget)
    kept = [b.rank for b in blocks if b.block == "memorules"]
    assert kept == sorted(kept)
    above = sorted(c.rank for c in _above(cands) if c.rank is not None)
    assert kept == above[: len(kept)]
    assert all(b.score >= RECALL_MIN_SCORE for b in blocks)


def test_an_observed_rule_below_an_asserted_one_in_score_takes_the_one_place():
    """The issue's case: budget 1, the asserted rule scores higher, the observed one ranks first."""
    asserted = attrs.evolve(make_candidate("asserted", 0.906, source="memorules", block="memorules"), rank=1)
    observed = attrs.evolve(make_candidate("observed", 0.779, source="memorules", block="memorules"), rank=0)
    (only,) = select([asserted, observed], budget=1)
    assert (only.entry_id, only.score, only.rank) == ("observed", 0.779, 0)
    fates_by_id = {f.candidate.entry_id: f.outcome for f in fates([asserted, observed], budget=1)}
    assert fates_by_id == {"observed": SELECTED, "asserted": CUT_BY_BUDGET}


def test_the_floor_applies_to_the_score_not_the_rank():
    """A first-ranked rule below the floor is not selected; the next one above it is."""
    weak = attrs.evolve(make_candidate("weak", 0.3, source="memorules", block="memorules"), rank=0)
    ok = attrs.evolve(make_candidate("ok", 0.6, source="memorules", block="memorules"), rank=1)
    assert [b.entry_id for b in select([weak, ok], budget=5)] == ["ok"]


@given(cands=_mixed())
def test_tally_counts_each_entry_once(cands):
    """Distinct memories, and of them those whose best candidate clears the floor."""
    memories, history = tally(cands)
    assert memories.candidates == len({c.entry_id for c in cands})
    assert memories.cleared == len({c.entry_id for c in _above(cands)})
    assert history.candidates == 0
    assert memories.cleared == len(select(cands, budget=100))


def test_tally_counts_past_tasks_apart():
    """A past task is not a memory: it is tallied in the history count."""
    cands = [
        make_candidate("m", 0.9, source="store"),
        make_candidate("m", 0.8, source="persona", block="persona_memories"),
        make_candidate("t", 0.7, source="past_tasks", block="history"),
        make_candidate("u", 0.1, source="past_tasks", block="history"),
    ]
    memories, history = tally(cands)
    assert (memories.candidates, memories.cleared) == (1, 1)
    assert (history.candidates, history.cleared) == (2, 1)


def test_tally_counts_the_memories_a_source_considered_under_the_floor():
    """Considered memories no source returned count as candidates that did not clear the floor."""
    cands = [make_candidate("a", 0.9, retrieval_key=(0, 1)), make_candidate("b", 0.3)]
    memories, _ = tally(cands, considered=frozenset({(0, 1), (0, 2), (1, 2)}))
    assert (memories.candidates, memories.cleared) == (4, 1)  # a, b, and two only considered


def test_a_considered_memory_a_source_also_returned_counts_once():
    """The store returning a memory the shared retrieval considered does not count it twice."""
    cands = [
        make_candidate("a", 0.9, retrieval_key=(0, 1)),
        make_candidate("a", 0.8, source="persona", retrieval_key=(0, 1)),
    ]
    memories, _ = tally(cands, considered=frozenset({(0, 1)}))
    assert (memories.candidates, memories.cleared) == (1, 1)
