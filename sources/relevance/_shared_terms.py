"""Own evidence from shared terms: the log-odds that a short text is what the active task is
about, from the informative terms the two share, each weighted by its rarity among the texts
compared. For texts scored on their own evidence rather than on the namespace's gate: a
completed task the active task may continue (`sources._past_tasks`), a graph fact about an
entity the task names (`sources._graphs`).

A likelihood ratio over the active task's informative terms. A term the text shares gains its
surprisal among the texts compared (its IDF over them, under the namespaces' pseudo-document
prior, `_relevance.idf`: at most idf(20, 1) = 4.39 nats for a term one of 20 texts holds), less
one bit; a term it does not share costs one bit. One bit because each term of a task about a
text is as likely to be carried over as not (TERM_ODDS = 1/2), so a long active task must share
more. The shared numbers of a task count as one term, the rarest: the analyser splits a version
or a quantity into its digits ("2.3.1" is 2, 3 and 1), which are one fact, not three ("testing
1 2 3" shares nothing with the 2.3.1 release notes). EVIDENCE_PRIOR is the prior log-odds
against a match; 5.5 puts the floor (log-odds -0.32) between one shared term and two: one term,
however rare, never clears it (4.39 - 0.69 - 5.5 = -1.8, p = 0.14), so "what time is it" pulls
in no timesheet task; two distinctive terms clear it in a task of up to five informative terms
(8.78 - 5 x 0.69 - 5.5 = -0.19, p = 0.45), a longer task needs a third. (As a prior: odds of
about 1 in 245 that the active task is about a given text before any word is compared.)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from ._relevance import idf

if TYPE_CHECKING:
    from collections.abc import Sequence

TERM_ODDS: Final = 0.5
EVIDENCE_PRIOR: Final = 5.5
COMPARED_MAX: Final = 20
"""Texts a term's rarity is read among, at most: more texts are read as this many (a term's
share of them kept, rounded up: never rarer than it is), so no term weighs more than one of 20
texts does (idf(20, 1) = 4.39) and one shared term never clears the floor, however many texts
are compared."""


def shared_term_logits(
    task_terms: frozenset[str], texts: Sequence[frozenset[str]], *, pinned: frozenset[str] = frozenset()
) -> list[float]:
    """Log-odds that the task is about each text (its informative terms), from the terms they
    share, each weighted by its rarity among `texts`; a `pinned` term weighs as if one text held
    it (a term that says why the texts are compared, not which of them is meant)."""
    df: dict[str, int] = {}
    for terms in texts:
        for t in terms & task_terms:
            df[t] = df.get(t, 0) + 1
    n = min(len(texts), COMPARED_MAX)
    weight = {t: idf(n, 1 if t in pinned else math.ceil(k * n / len(texts))) for t, k in df.items()}
    bit = math.log(1.0 / TERM_ODDS)
    cost = bit * len(task_terms) + EVIDENCE_PRIOR
    return [_shared_evidence(terms & task_terms, weight) - cost for terms in texts]


def _shared_evidence(shared: frozenset[str], weight: dict[str, float]) -> float:
    """The surprisal of the shared terms, the shared numbers counted once (their rarest)."""
    words = sum(weight[t] for t in shared if not t.isdigit())
    return words + max((weight[t] for t in shared if t.isdigit()), default=0.0)


def sigmoid(z: float) -> float:
    """1 / (1 + e^-z), numerically safe."""
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))
