"""The `past_tasks` source: completed tasks of the namespace, scored for this turn's task.

A past task is scored on its own evidence: the probability that the active task continues or
repeats it, from the two tasks' texts alone (`continuation_probabilities`), never from the
namespace's memories or the task's gate in them. So a follow-up ("Do the same Postgres 16
migration for the invoicing service") finds the completed task it follows whether or not
any memory serves it, and scores the same in an empty namespace and a populated one. It
enters the context only when it clears the one floor; the broker then reads its status and
turns from the task repositories (the one authority on tasks) and renders it as labelled
past context. Past-task text never joins the query.

Past tasks have no stored vectors: in dense modes their texts are embedded when first seen
and kept (`_EMBEDDED` texts per source), so a turn pays only for tasks completed since.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, ClassVar, Final

import attrs
import numpy as np

from broker import Candidate, ConfigError

from ._scoring import best_first
from ._singleflight import SingleFlight
from ._source_base import ReaderSource
from .relevance._relevance import DENSE_MODES
from .relevance._shared_terms import shared_term_logits, sigmoid
from .storage import _analysis

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from broker.abc import Embedder, SourceRequest

    from .storage._engine import Reader

PAST_TASK_DEPTH: Final = 20
"""The most recently completed tasks a turn considers."""
_TEXT_CHARS: Final = 2_000  # of description and user turns, scored as one text
_EMBEDDED: Final = 256
_NAMESPACES: Final = 16  # namespaces whose recent past tasks are kept, at their write generation

# The evidence that the active task continues or repeats a past task, as log-odds.
#
# Lexical: the likelihood ratio of the terms the two share, each weighted by its rarity among
# the past tasks (`sources.relevance._shared_terms`: one shared term, however rare, never clears
# the floor, so "what time is it" pulls in no timesheet task; two distinctive terms clear it in
# a task of up to five informative terms). (As a prior: about one turn in twelve continuing one
# of twenty completed tasks.)
#
# Dense: a logistic of the cosine of the two tasks' MiniLM vectors. A task's own follow-up or
# repeat lies at about 0.55-0.95 from it, two different tasks of one team mostly under 0.5,
# small talk under 0.4: even odds at COSINE_MIDPOINT = 0.57, and COSINE_SLOPE = 20 makes a
# 0.1 step of cosine two logits (p from 0.27 to 0.73), so the floor sits at cosine 0.555.
#
# Hybrid: the mean of the two views' odds (log((e^a + e^b) / 2) of their log-odds a, b). The
# two views see the same words, so their evidence is not independent and is averaged, not
# added. Averaging odds rather than log-odds lets the view that sees a continuation clearly
# carry it when the other is unsure: "Upgrade invoicing's database like we did for billing"
# shares two distinctive terms with the Postgres migration (lexical p 0.60 among twelve past
# tasks, 0.56 among five) in other words than its (cosine 0.51, dense p 0.25): the mean of
# log-odds put it at 0.41 (0.39), under the floor; the mean of odds at 0.48 (0.44). The price:
# a view can no longer veto. One that refutes a task (p near 0) lowers the other's log-odds by
# ln 2 at most, so a task one view alone puts at p 0.59 or more is injected whatever the other
# says (lexically, two distinctive shared terms in a short task; in the set below every pair
# the shared terms put at 0.59 or more was a real follow-up, 32 of 32, cosines 0.43-0.87). A
# power mean of the odds with exponent 1/2 keeps more of a veto and scored the same on the set,
# but left the paraphrase at 0.418 among five past tasks.
# Measured on benchmarks/data/past_tasks.json (`python -m benchmarks.past_tasks`): hybrid
# follow-ups served 18 -> 20 of 22 on the teams the rule was chosen on, 18 of 20 held out
# either way; no more wrong injections, small talk none.
COSINE_MIDPOINT: Final = 0.57
COSINE_SLOPE: Final = 20.0


@attrs.frozen(kw_only=True)
class PastTaskText:
    """A completed task as it is scored: its id, when it completed, its text (description and
    user turns) and that text's informative terms."""

    task_id: str
    completed_at: str
    text: str
    terms: frozenset[str]


@attrs.define(eq=False)
class PastTaskSource(ReaderSource):
    """Completed tasks of the namespace that the active task continues or repeats, on the one
    floor. Not gated: a past task is scored on its own evidence, not the namespace's memories."""

    name: ClassVar[str] = "past_tasks"
    _vectors: SingleFlight[str, npt.NDArray[np.float32]] = attrs.field(
        factory=lambda: SingleFlight(size=_EMBEDDED), init=False
    )
    _recent: SingleFlight[tuple[int, int], tuple[PastTaskText, ...]] = attrs.field(
        factory=lambda: SingleFlight(size=_NAMESPACES), init=False
    )

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        ns_id = conn.namespace_id(request.namespace)
        task_terms = frozenset(_analysis.query_terms(request.task))
        if ns_id is None or not task_terms:  # no informative term ("thanks!"): nothing continues
            return []
        past = self._recent.get((ns_id, conn.generation(ns_id)), lambda: _recent(conn, ns_id))
        if not past:
            return []
        scores = continuation_probabilities(
            self._mode(request), task_terms, past, self._cosines(request, past)
        )
        return best_first(
            (_candidate(self.name, p, score) for p, score in zip(past, scores, strict=True)),
            request.limit,
            self.min_score,
        )

    def _cosines(self, request: SourceRequest, past: Sequence[PastTaskText]) -> list[float] | None:
        """The cosine of the task with each past task in dense modes (None in lexical mode):
        the task's vector from the store's query cache, the past tasks' embedded once each
        (those not seen yet in one batch)."""
        if self._mode(request) not in DENSE_MODES:
            return None
        embedder = self._reader.embedder
        if embedder is None:
            mode = self._mode(request)
            msg = f"recall mode {mode!r} needs an embedder; open the store with one or use mode='lexical'"
            raise ConfigError(msg)
        missing = list(dict.fromkeys(p.text for p in past if not self._vectors.holds(p.text)))
        fresh = dict(zip(missing, embedder.embed(missing), strict=True)) if missing else {}
        query = embedder.embed([request.task])[0]
        return [
            float(query @ self._vectors.get(p.text, functools.partial(_vector, embedder, fresh, p.text)))
            for p in past
        ]

    def _mode(self, request: SourceRequest) -> str:
        return request.mode or self.default_mode


def continuation_probabilities(
    mode: str, task_terms: frozenset[str], past: Sequence[PastTaskText], cosines: Sequence[float] | None
) -> list[float]:
    """The probability that the active task (its informative terms; its cosine with each past
    task in dense modes) continues or repeats each past task, in `mode` (see the constants)."""
    if mode == "lexical" or cosines is None:
        logits = lexical_logits(task_terms, past)
    elif mode == "dense":
        logits = dense_logits(cosines)
    else:
        logits = [
            mean_odds(a, b)
            for a, b in zip(lexical_logits(task_terms, past), dense_logits(cosines), strict=True)
        ]
    return [sigmoid(z) for z in logits]


def lexical_logits(task_terms: frozenset[str], past: Sequence[PastTaskText]) -> list[float]:
    """Log-odds that the task continues each past task, from the terms they share, each
    weighted by its rarity among these past tasks (`shared_term_logits`)."""
    return shared_term_logits(task_terms, [p.terms for p in past])


def mean_odds(a: float, b: float) -> float:
    """The log-odds of the mean of two odds: log((e^a + e^b) / 2), numerically safe. Between
    the mean of the two log-odds and the larger of them, and at most ln 2 under the larger."""
    return max(a, b) + math.log1p(math.exp(-abs(a - b))) - math.log(2.0)


def dense_logits(cosines: Sequence[float]) -> list[float]:
    """Log-odds that the task continues each past task, from their cosines."""
    return [COSINE_SLOPE * (c - COSINE_MIDPOINT) for c in cosines]


def _vector(
    embedder: Embedder, fresh: dict[str, npt.NDArray[np.float32]], text: str
) -> npt.NDArray[np.float32]:
    """A past task's vector: embedded with the turn's batch, or alone (evicted meanwhile)."""
    found = fresh.get(text)
    vector: npt.NDArray[np.float32] = embedder.embed([text])[0] if found is None else found
    return vector


def _candidate(source: str, past: PastTaskText, score: float) -> Candidate:
    return Candidate(
        entry_id=past.task_id,
        source=source,
        score=score,
        text=past.text,
        block="history",
        created_at=past.completed_at,
    )


def _recent(conn: Reader, ns_id: int) -> tuple[PastTaskText, ...]:
    """The namespace's most recently completed tasks, newest first, as they are scored."""
    out = []
    for r in conn.tasks.completed(ns_id, limit=PAST_TASK_DEPTH):
        text = _text(conn, ns_id, r.task_id, r.description)
        out.append(
            PastTaskText(
                task_id=r.task_id,
                completed_at=r.updated_at,
                text=text,
                terms=frozenset(_analysis.terms(text)),
            )
        )
    return tuple(out)


def _text(conn: Reader, ns_id: int, task_id: str, description: str) -> str:
    """The description and the user turns of a past task, as one bounded text."""
    turns = conn.tasks.turns(ns_id, task_id, role="user")
    parts = [description, *(t.text for t in turns if t.text.strip() != description.strip())]
    return "\n".join(parts)[:_TEXT_CHARS]
