"""A conversation turn read in its context: episodic memories written one after another
(the turns of a conversation) are ranked with the best of their close neighbours' scores.

A turn's words often name its subject only in the turn before or after it ("Yes, I went
there last week"), so a turn whose neighbours match the task stands higher than its own
words put it. The standing is a re-ranking only: the candidates' calibrated scores, as a
set, stay what the scorer gave (the k-th best candidate keeps the k-th best score), so the
floor admits as many memories as before, and which ones changes (a memory takes the score and
band of the rank it lands at; its base relevance stays its own). Semantic facts, written in
no order that means anything, keep their own score as their ranking key (among turns that
rise they may land lower, and take that rank's score).

Neighbours are read in rowid order, which is the namespace's write order when its turns are
written one after another (a conversation ingested or appended turn by turn). Turns of two
namespaces written interleaved are farther apart in rowids (`REACH` still finds the nearest),
and a turn rewritten with `replace` moves to the end: its old neighbours no longer count.

Neighbours are turns among the candidates of the same recall whose rowids lie within `REACH`
of each other (written in sequence into the namespace); a memory that is no candidate counts 0.
A turn is an episodic memory that is a message or opens with its speaker's name ("Caroline:
...", `sources.storage._entries.is_turn`): episodic notes of unrelated events written one
after another (an incident, then a meeting) are not a conversation, and each is ranked on its
own words, as a fact is.
Measured on the LoCoMo dev conversations, hybrid, floor 0: a gold turn among the first 10
in 0.755 of answerable questions alone, 0.812 with the neighbours (every conversation
gains); `NEIGHBOUR_WEIGHT` and `REACH` were read from that curve.

A question asked in the conversation is answered by the turn after it: a turn right after a
candidate turn that asks a question (its text holds a '?') also adds `QUESTION_WEIGHT` x that
question's score. The question names the subject ("Where's the offsite this year?"), its answer
often does not ("Lisbon, in May"), so the question outranked the turn a task needs. Measured the
same way (the store's own scores at floor 0, `python -m benchmarks.turn_context`): a gold turn
among the first 10 in 0.790 of the questions with the neighbours, 0.814 with the answer after a
question raised too (0.783 -> 0.829, 0.765 -> 0.778, 0.875 -> 0.895, 0.729 -> 0.749,
0.803 -> 0.820 conversation by conversation; any weight from 0.25 to 1 gave 0.806-0.814, and
the first place 0.383 -> 0.433, where the neighbours alone had lowered it from 0.419).

A conversation also talks about one thing for a while: a turn adds `STRETCH_WEIGHT` x the best
score in its stretch (itself and the episodic candidates within `STRETCH` rowids), so the turns
around a strong match rise together, where the neighbour term reaches two turns only. Measured
the same way: a gold turn among the first 10 in 0.814 -> 0.828 of the questions (0.829 -> 0.849,
0.778 -> 0.802, 0.895 -> 0.882, 0.749 -> 0.759, 0.820 -> 0.854), first place 0.433 -> 0.448;
the weight and reach chosen with each conversation left out in turn give 0.827.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from sources.storage._entries import is_turn

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._scorer import Relevance

EPISODIC = "episodic"
NEIGHBOUR_WEIGHT = 0.5
"""How much of the best neighbour's score a turn's ranking adds to its own."""
REACH = 2
"""How many turns before and after a turn count as its neighbours."""
QUESTION_WEIGHT = 0.5
"""How much of the score of the question right before it a turn's ranking adds (its answer)."""
STRETCH_WEIGHT = 0.5
"""How much of the best score in the stretch of conversation around it a turn's ranking adds."""
STRETCH = 5
"""How many turns before and after a turn (and the turn itself) make its stretch."""
WEIGHTS = (NEIGHBOUR_WEIGHT, QUESTION_WEIGHT, STRETCH_WEIGHT)
_STRETCH_STEPS = tuple(range(-max(STRETCH, REACH), max(STRETCH, REACH) + 1))
_STRETCH_ROWS = [i for i, step in enumerate(_STRETCH_STEPS) if abs(step) <= STRETCH]
_NEIGHBOUR_ROWS = [i for i, step in enumerate(_STRETCH_STEPS) if 0 < abs(step) <= REACH]


def standing(
    scores: Sequence[float],
    rowids: Sequence[int],
    episodic: Sequence[bool],
    questions: Sequence[bool],
    weights: tuple[float, float, float] = WEIGHTS,
) -> list[float]:
    """Each candidate's ranking key: its score, plus, when it is episodic itself and has some
    evidence of its own (a score above 0), the first of `weights` x the best score among the
    episodic candidates within `REACH` rowids of it, the second x the score of the episodic
    candidate right before it if that one asks a question (`questions`), and the third x the
    best score in its stretch (itself and the episodic candidates within `STRETCH` rowids).
    Any other candidate (a fact, an unclassified note) is its own stretch: it adds the third
    weight x its own score, so a turn no neighbour raises and a fact of the same score rank
    alike. The weights are `WEIGHTS` but for `python -m benchmarks.turn_context`, which varies
    them."""
    own = np.asarray(scores, dtype=np.float64)
    turn = np.asarray(episodic, dtype=bool)
    if not turn.any():
        unchanged: list[float] = own.tolist()
        return unchanged
    rows = np.asarray(rowids, dtype=np.int64)
    order = np.argsort(rows)
    at, heard = rows[order], np.where(turn, own, 0.0)[order]
    asked = np.where(turn & np.asarray(questions, dtype=bool), own, 0.0)[order]
    around = np.array([_at_step(at, heard, step) for step in _STRETCH_STEPS])  # each step read once
    best, stretch = around[_NEIGHBOUR_ROWS].max(axis=0), around[_STRETCH_ROWS].max(axis=0)
    raised_sorted = weights[0] * best + weights[1] * _at_step(at, asked, -1) + weights[2] * stretch
    raised = np.empty(len(at))
    raised[order] = raised_sorted
    keys: list[float] = (own + np.where(turn & (own > 0.0), raised, weights[2] * own)).tolist()
    return keys


def _at_step(
    at: npt.NDArray[np.int64], values: npt.NDArray[np.float64], step: int
) -> npt.NDArray[np.float64]:
    """For each of the sorted rowids `at`, the value of the candidate `step` rowids from it (0
    where there is none)."""
    pos = np.minimum(np.searchsorted(at, at + step), len(at) - 1)
    found: npt.NDArray[np.float64] = np.where(at[pos] == at + step, values[pos], 0.0)
    return found


def in_context(
    rels: Sequence[Relevance],
    rowids: Sequence[int],
    episodic: Sequence[bool],
    questions: Sequence[bool],
    floor: float = 0.0,
) -> list[tuple[int, Relevance]]:
    """The candidates (their relevances, rowids, whether each is episodic and whether each asks
    a question) re-ranked with the turns' neighbours, best first, as (index into the inputs,
    relevance): the relevances, best first, handed out in that order (ties keep the inputs'
    order). Above 0, `floor` leaves out the places whose score has no evidence or is under it
    (the last places: the scores go out best first)."""
    scores = [rel.score for rel in rels]
    keys = standing(scores, rowids, episodic, questions)
    order = sorted(range(len(rels)), key=lambda i: -keys[i])
    best = sorted(rels, key=lambda rel: -rel.score)
    if floor > 0.0:
        best = [rel for rel in best if rel.score > 0.0 and rel.score >= floor]
    # The k-th memory takes the k-th standing (score and band); its base relevance stays its own.
    return [(i, _taken(rels[i], rel)) for i, rel in zip(order, best, strict=False)]


def _taken(own: Relevance, standing: Relevance) -> Relevance:
    """The standing a memory lands at, with its own base relevance (and its own score, when
    the standing's differs)."""
    moved = standing.score != own.score
    return attrs.evolve(standing, base=own.base, own=own.score if moved else None)


def rows_in_context(
    scored: Sequence[tuple[Relevance, Any]], floor: float = 0.0
) -> list[tuple[Relevance, Any]]:
    """`in_context` of scored entry rows (relevance, row), best first, those under `floor` left out."""
    rels = [rel for rel, _ in scored]
    rows = [row for _, row in scored]
    turns = [turn(row) for row in rows]
    ranked = in_context(
        rels,
        [int(row[0]) for row in rows],
        turns,
        [is_one and asks(row[6]) for is_one, row in zip(turns, rows, strict=True)],
        floor,
    )
    return [(rel, scored[i][1]) for i, rel in ranked]


def turn(row: Sequence[Any]) -> bool:
    """Whether an entry row (its kind, type and text at 4, 5 and 6) is a conversation's turn
    (`sources.storage._entries.is_turn`), as the engines' `episodic_turns` tell it."""
    return bool(row[5] == EPISODIC and is_turn(row[4], row[6]))


def asks(text: str) -> bool:
    """Whether a turn asks a question (its text holds a '?'), as the engines' `episodic_turns`
    tell it."""
    return "?" in text
