"""The turn-context harness: its re-ranking is the library's, and its hit@k counts what it says."""

from __future__ import annotations

from benchmarks import turn_context
from benchmarks.turn_context import Asked


def _asked() -> Asked:
    """A question turn (rowid 10) that outscores its answer (11, the gold one) and a far turn (30)."""
    return Asked(0, ((10, 0.8, True, "q"), (11, 0.3, False, "a"), (30, 0.5, False, "far")), frozenset({"a"}))


def test_the_answer_after_a_question_rises_with_the_question_weight_only() -> None:
    """On own words the answer is last; with the neighbours it passes the far turn; with the
    question weight it passes the question too."""
    assert turn_context.ranked(_asked(), (0.0, 0.0, 0.0)) == ["q", "far", "a"]
    assert turn_context.ranked(_asked(), (0.5, 0.0, 0.0)) == ["q", "a", "far"]
    assert turn_context.ranked(_asked(), (0.5, 0.5, 0.0)) == ["a", "q", "far"]


def test_hits_count_questions_with_a_gold_turn_in_the_first_k() -> None:
    """hit@1 counts only the question whose gold stands first; hit@3 both."""
    other = Asked(1, ((5, 0.9, False, "x"), (6, 0.1, False, "y")), frozenset({"x"}))
    assert turn_context.hits([_asked(), other], (0.0, 0.0, 0.0), 1) == 0.5
    assert turn_context.hits([_asked(), other], (0.0, 0.0, 0.0), 3) == 1.0
    assert turn_context.hits([_asked(), other], (0.5, 0.5, 0.0), 1) == 1.0
