"""The off-topic closeness of the QPP gate: the lexical one is the best Jaccard overlap, by definition."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sources.relevance import _offtopic
from sources.storage import _analysis

TASKS = _offtopic.tasks()
WORDS = [*sorted({w for t in TASKS for w in _analysis.terms(t)}), "zzzunknown"]


def _by_definition(task: str, terms: list[str]) -> float:
    own = _offtopic._excluded(task)
    mine = frozenset(terms)
    sets = [(_offtopic._key(t), frozenset(_analysis.terms(t))) for t in TASKS]
    overlaps = [len(mine & s) / len(mine | s) for k, s in sets if k != own and s]
    return max(overlaps, default=0.0) if mine else 0.0


@given(task=st.sampled_from(TASKS), terms=st.lists(st.sampled_from(WORDS), max_size=6), alone=st.booleans())
def test_lexical_closeness_is_the_best_jaccard_with_another_offtopic_task(task, terms, alone):
    """The inverted-index closeness equals the best Jaccard overlap, leaving the task itself out in the fit."""
    if alone:
        with _offtopic.leave_self_out():
            assert _offtopic.lexical_closeness(task, terms) == _by_definition(task, terms)
    else:
        assert _offtopic.lexical_closeness(task, terms) == _by_definition(task, terms)


def test_an_offtopic_task_is_as_close_as_can_be_unless_it_is_left_out():
    """A shipped off-topic task's own terms give closeness 1, and less once the fit leaves it out."""
    task = next(t for t in TASKS if len(set(_analysis.terms(t))) >= 3)
    terms = list(_analysis.terms(task))
    assert _offtopic.lexical_closeness(task, terms) == 1.0
    with _offtopic.leave_self_out():
        assert _offtopic.lexical_closeness(task, terms) < 1.0
