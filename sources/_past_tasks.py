"""The `past_tasks` source: completed tasks of the namespace, scored for this turn's task.

A past task enters the context only when it clears the one floor for the active task, as a
memory does: its description and its user turns are scored on the one calibrated scale. The
broker then reads its status and turns from the task repositories (the one authority on
tasks) and renders it as labelled past context.

Past tasks have no stored vectors: in dense modes their texts are embedded when first seen
and kept (`_EMBEDDED` texts per source), so a turn pays only for tasks completed since.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, ClassVar, Final

import attrs

from broker import Candidate

from . import _analysis
from ._relevance import DENSE_MODES
from ._singleflight import SingleFlight
from ._source_base import ReaderSource, best_first

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from broker.abc import Embedder, SourceRequest

    from ._engine import Reader
    from ._scorer import Scorer

PAST_TASK_DEPTH: Final = 20
"""The most recently completed tasks a turn considers."""
_TEXT_CHARS: Final = 2_000  # of description and user turns, scored as one text
_EMBEDDED: Final = 256


@attrs.define(eq=False)
class PastTaskSource(ReaderSource):
    """Completed tasks of the namespace that clear the floor for the active task."""

    name: ClassVar[str] = "past_tasks"
    gated: ClassVar[bool] = True
    _vectors: SingleFlight[str, npt.NDArray[np.float32]] = attrs.field(
        factory=lambda: SingleFlight(size=_EMBEDDED), init=False
    )

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        ns_id = conn.namespace_id(request.namespace)
        if ns_id is None:
            return []
        rows = _recent(conn, ns_id)
        if not rows:
            return []
        scorer = self._reader.scorer(conn, ns_id, request.task, request.mode)
        if self._gate_closed(scorer):  # no past task can reach the floor: none is rendered
            return []
        texts = [_text(conn, ns_id, task_id, description) for task_id, description, _at in rows]
        rels = scorer.relevances([_analysis.terms(t) for t in texts], texts, self._vectors_of(scorer, texts))
        return best_first(
            (
                Candidate(
                    entry_id=task_id,
                    source=self.name,
                    score=rel.score,
                    qpp=rel.qpp,
                    band=rel.band,
                    text=text,
                    block="history",
                    created_at=at,
                )
                for (task_id, _d, at), text, rel in zip(rows, texts, rels, strict=True)
            ),
            request.limit,
            self.min_score,
        )

    def _vectors_of(self, scorer: Scorer, texts: list[str]) -> list[npt.NDArray[np.float32] | None]:
        embedder = scorer.embedder
        if scorer.mode not in DENSE_MODES or embedder is None:
            return [None] * len(texts)
        return [self._vectors.get(t, functools.partial(_embed_one, embedder, t)) for t in texts]


def _embed_one(embedder: Embedder, text: str) -> npt.NDArray[np.float32]:
    vector: npt.NDArray[np.float32] = embedder.embed([text])[0]
    return vector


def _recent(conn: Reader, ns_id: int) -> list[tuple[str, str, str]]:
    return [
        (r.task_id, r.description, r.updated_at) for r in conn.tasks.completed(ns_id, limit=PAST_TASK_DEPTH)
    ]


def _text(conn: Reader, ns_id: int, task_id: str, description: str) -> str:
    """The description and the user turns of a past task, as one bounded text."""
    turns = conn.tasks.turns(ns_id, task_id, role="user")
    parts = [description, *(t.text for t in turns if t.text.strip() != description.strip())]
    return "\n".join(parts)[:_TEXT_CHARS]
