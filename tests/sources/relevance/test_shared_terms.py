"""Own evidence from shared terms (`sources.relevance._shared_terms`): one shared term never
clears the floor, two distinctive ones do in a short task, and sharing more never lowers it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import RECALL_MIN_SCORE
from sources.relevance._shared_terms import shared_term_logits, sigmoid

WORDS = st.text(alphabet="abcdefghij", min_size=3, max_size=6)


@settings(deadline=None)
@given(others=st.integers(min_value=0, max_value=500), extra=st.sets(WORDS, max_size=6))
def test_one_shared_term_never_clears_the_floor(others: int, extra: set[str]) -> None:
    """However rare the one term a text shares with the task, however short the task and however many texts are compared, it stays under the floor."""
    task = frozenset({"ledger", *extra})
    texts = [frozenset({"ledger", "zzz"}), *(frozenset({f"other{i}"}) for i in range(others))]
    assert sigmoid(shared_term_logits(task, texts)[0]) < RECALL_MIN_SCORE


@settings(deadline=None)
@given(others=st.integers(min_value=0, max_value=18))
def test_two_distinctive_terms_clear_the_floor_in_a_short_task(others: int) -> None:
    """A text sharing two terms no other text holds with a task of two informative terms clears the floor."""
    texts = [
        frozenset({"ana", "maintain", "ledger"}),
        *(frozenset({f"other{i}", "ana"}) for i in range(others)),
    ]
    assert sigmoid(shared_term_logits(frozenset({"maintain", "ledger"}), texts)[0]) >= RECALL_MIN_SCORE


@settings(deadline=None)
@given(task=st.frozensets(WORDS, min_size=1, max_size=6), text=st.frozensets(WORDS, max_size=6), more=WORDS)
def test_sharing_one_more_term_never_lowers_the_evidence(
    task: frozenset[str], text: frozenset[str], more: str
) -> None:
    """Adding a task term to a text never lowers its log-odds (a shared term gains at least one bit back)."""
    task = task | {more}
    before = shared_term_logits(task, [text - {more}])[0]
    after = shared_term_logits(task, [text | {more}])[0]
    assert after >= before - 1e-9


def test_shared_numbers_count_once() -> None:
    """A version's digits are one shared fact, not one each."""
    (digits, words) = shared_term_logits(
        frozenset({"2", "3", "1", "note"}), [frozenset({"2", "3", "1"}), frozenset({"note"})]
    )
    assert abs(digits - words) < 1e-9


@given(others=st.integers(min_value=1, max_value=60))
@settings(deadline=None)
def test_a_pinned_term_weighs_as_if_one_text_held_it(others: int) -> None:
    """A term every text holds weighs nothing unless pinned; pinned, it weighs what a term of one text does."""
    texts = [frozenset({"ledger", "maintain"}), *(frozenset({"ledger", f"use{i}"}) for i in range(others))]
    task = frozenset({"ledger", "maintain"})
    free = shared_term_logits(task, texts)[0]
    pinned = shared_term_logits(task, texts, pinned=frozenset({"ledger"}))[0]
    alone = shared_term_logits(task, [texts[0], *(frozenset({f"use{i}"}) for i in range(others))])[0]
    assert pinned == pytest.approx(alone)
    assert pinned > free
