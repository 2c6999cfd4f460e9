"""The one score of a source's texts and the candidates it keeps: batches scored in the
request's mode, the best rows first, the turn's shared retrieval."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import attrs

from broker import Candidate

from .relevance import _batch
from .relevance._relevance import DENSE_MODES
from .relevance._scorer import Relevance, Scorer
from .storage import _analysis, _validate
from .storage._engine import Slot
from .storage._runs import LexicalRun

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from .storage._engine import Reader
    from .storage._vectors import VectorIndex


@attrs.frozen(kw_only=True)
class Batch:
    """Texts a source scores together: rows of one corpus of a namespace (`slot`; None for
    texts without stored vectors, such as a rendered graph edge), their texts and, when they
    differ from analysing the text, their terms (a neuron is scored on its text and its
    trigger phrases; an indexed row on its indexed body)."""

    slot: Slot | None
    rowids: Sequence[int]
    texts: Sequence[str]
    terms: Sequence[Sequence[str]] | None = None


def score_rows(
    scorer: Scorer, conn: Reader, batch: Batch, vindex: VectorIndex | None = None
) -> list[Relevance]:
    """Relevance of a batch of texts on the one calibrated scale, in the scorer's mode.

    In dense modes each row's stored vector is used (its cosine from `vindex`'s matrix in
    memory); texts without one (or a batch without a slot) are embedded in one batch, as
    `Scorer.relevances_given` does.
    """
    texts = batch.texts
    terms = batch.terms if batch.terms is not None else [_analysis.terms(t) for t in texts]
    query = scorer.query_vector
    if scorer.mode not in DENSE_MODES or scorer.abstains or query is None or not texts:
        return scorer.relevances(terms, texts)
    cosines: list[float | None] = [None] * len(texts)
    if vindex is not None and batch.slot is not None:
        found = vindex.cosines(conn, batch.slot, list(batch.rowids), query)
        cosines = [found.get(r) for r in batch.rowids]
    return scorer.relevances_given(terms, texts, cosines)


def lexical_scores(scorer: Scorer, docs: Sequence[Sequence[str]]) -> list[float]:
    """The lexical base relevance of texts (their analysed terms): a cheap rank before the mode's."""
    matrix = _batch.lexical_matrix(scorer.profile, docs)
    probabilities = _batch.base_probabilities("lexical", scorer.profile, matrix, None, scorer.reference)
    return [float(p) for p in probabilities]


def _first_id(item: tuple[Sequence[Any], Any]) -> object:
    """The id column of a (row, relevance) pair whose row is (rowid, id, ...)."""
    return item[0][1]


@attrs.frozen(kw_only=True)
class BestRows:
    """`best_first` over scored rows, building candidates only for the best `limit` rows.

    The rows are ordered as `best_first` orders candidates (score, then the entry id the row
    becomes); a damaged row among the best is skipped (and logged) and the next one taken.
    """

    entry_id: Callable[[Sequence[Any]], str]
    table: str
    limit: int
    floor: float = 0.0
    """Rows scoring under it are dropped before any candidate is built."""

    def candidates(
        self,
        scored: Iterable[tuple[Sequence[Any], Relevance]],
        build: Callable[[tuple[Sequence[Any], Relevance]], Candidate],
    ) -> list[Candidate]:
        """The best rows' candidates, best first, at most `limit`."""
        kept = sorted(
            ((row, rel) for row, rel in scored if rel.score > 0.0 and rel.score >= self.floor),
            key=lambda pair: (-pair[1].score, self.entry_id(pair[0])),
        )
        built = _validate.skip_damaged(kept, build, table=self.table, row_id=_first_id)
        return list(itertools.islice(built, max(self.limit, 0)))


def clearing(rowids: Iterable[int], rels: Iterable[Relevance], floor: float) -> dict[int, Relevance]:
    """The rowids (in their order) whose relevance has some evidence and is at least `floor`,
    with it: the rows worth reading."""
    return {r: rel for r, rel in zip(rowids, rels, strict=True) if rel.score > 0.0 and rel.score >= floor}


def best_first(candidates: Iterable[Candidate], limit: int, floor: float = 0.0) -> list[Candidate]:
    """Candidates with some evidence (score > 0) and at least `floor`, best first (ties by id),
    at most `limit`."""
    kept = [c for c in candidates if c.score > 0.0 and c.score >= floor]
    kept.sort(key=lambda c: (-c.score, c.entry_id))
    return kept[: max(limit, 0)]


def shared_or_searched(conn: Reader, ns_id: int, scorer: Scorer, *, corpus: int, depth: int) -> LexicalRun:
    """The task's best `depth` FTS matches of one corpus: the turn's shared retrieval (the
    scorer's reference, computed once for every source) when it went that deep, else a
    search of this corpus alone."""
    shared = scorer.reference.hits(corpus, depth)
    if shared is not None:
        return shared
    return LexicalRun.pack(
        conn.lexical_candidates(ns_id, sorted(scorer.profile.present), corpus=corpus, limit=depth)
    )


def recall_depth(limit: int) -> int:
    """How many index hits to score for a request of `limit` (the store uses the same)."""
    return max(4 * limit, 50)
