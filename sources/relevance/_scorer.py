"""The `Scorer`: every source's one way to score a text for a task, on the one calibrated scale.

Built once per request (`MemoryStore.scorer_on`), with the namespace's `Reference` for the
task. A text's score is `qpp x band` (`sources.relevance._gate`): the task's gate, shared by every
candidate of the turn, times the text's standing against the namespace's best, derived
from its base relevance (`sources.relevance._relevance`) in the scorer's mode. An equal text gets an
equal score from every source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from broker import ConfigError
from sources.storage import _analysis

from . import _batch, _gate
from ._relevance import (
    DENSE_MODES,
    NO_REFERENCE,
    QueryProfile,
    Reference,
    check_mode,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from broker.abc import Embedder


@attrs.frozen(kw_only=True)
class Relevance:
    """One text's score and its parts: the task's gate, the text's band and base relevance."""

    score: float
    qpp: float
    band: float
    base: float
    own: float | None = None
    """The score of the text's own words when its conversation context ranked it elsewhere and
    it took that rank's score (`sources.relevance._turn_context`); None when the score is its own."""


ZERO = Relevance(score=0.0, qpp=0.0, band=0.0, base=0.0)


@attrs.frozen(kw_only=True)
class Scorer:
    """Scores texts against one query on the one calibrated scale, in one mode.

    Build it once per request (`MemoryStore.scorer_on`); `score` is pure and thread-safe. In
    dense and hybrid modes a text needs its vector: pass the stored one (same model) when
    there is one; `score_texts` embeds those without one in a single batch, so a source
    without stored vectors still scores an equally relevant text exactly as the store does
    (at about 1.3 ms a text).
    """

    profile: QueryProfile
    mode: str
    query: str = ""
    """The query text (the reference's gate reads it)."""
    query_vector: npt.NDArray[np.float32] | None = None
    embedder: Embedder | None = None
    reference: Reference = NO_REFERENCE

    @classmethod
    def build(cls, profile: QueryProfile, query: str, *, mode: str, embedder: Embedder | None) -> Scorer:
        """Build a scorer for `query` (already profiled against the namespace) in `mode`,
        without a reference yet (every score is 0 until one is attached).

        ConfigError if a dense mode is asked without an embedder. The query is embedded
        only when it has an informative term (otherwise every score is 0 anyway).
        """
        mode = check_mode(mode)
        if mode not in DENSE_MODES:
            return cls(profile=profile, mode=mode, query=query)
        if embedder is None:
            msg = f"recall mode {mode!r} needs an embedder; open the store with one or use mode='lexical'"
            raise ConfigError(msg)
        vector = embedder.embed([query])[0] if profile.terms else None
        return cls(profile=profile, mode=mode, query=query, query_vector=vector, embedder=embedder)

    @property
    def abstains(self) -> bool:
        """True when no text can score above 0 (no informative term, or a closed gate)."""
        return not self.profile.terms or self.reference.qpp <= 0.0

    @property
    def qpp(self) -> float:
        """The task's gate in this namespace (shared by every text)."""
        return self.reference.qpp

    def relevance(self, text_terms: Sequence[str], cosine: float | None = None) -> Relevance:
        """A text's score with its parts (`cosine` with the query in dense modes)."""
        return self.relevances_at([text_terms], None if cosine is None else [cosine])[0]

    def relevances_at(
        self, terms: Sequence[Sequence[str]], cosines: Sequence[float] | None = None
    ) -> list[Relevance]:
        """Scores of many texts with their parts, in one pass over arrays (`sources.relevance._batch`):
        each text's analysed terms and, in dense modes, its cosine with the query (ValueError
        without). A text's score does not depend on the others scored with it."""
        if self.abstains or not terms:
            return [ZERO] * len(terms)
        if self.mode != "lexical" and cosines is None:
            msg = "dense and hybrid scores need the text's cosine"
            raise ValueError(msg)
        cos = None if cosines is None or self.mode == "lexical" else np.asarray(cosines, dtype=np.float64)
        ref = self.reference
        lexical = (
            _batch.lexical_matrix(self.profile, terms)
            if self.mode != "dense"
            else _batch.no_match(len(terms))
        )
        base = _batch.base_probabilities(self.mode, self.profile, lexical, cos, ref)
        kept = base > 0.0
        band = np.where(
            kept,
            _batch.band_probabilities(
                self.mode, _batch.logits(base), cos, ref, _gate.band_size(self.profile)
            ),
            0.0,
        )
        qpp = self.qpp
        return [
            Relevance(score=qpp * b, qpp=qpp, band=b, base=p)
            if ok
            else Relevance(score=0.0, qpp=qpp, band=0.0, base=0.0)
            for ok, b, p in zip(kept.tolist(), band.tolist(), base.tolist(), strict=True)
        ]

    def score(self, text_terms: Sequence[str], text_vector: npt.NDArray[np.float32] | None = None) -> float:
        """The score of a text (its analysed terms, and its vector in dense modes)."""
        return self.relevance_of(text_terms, text_vector).score

    def relevance_of(
        self, text_terms: Sequence[str], text_vector: npt.NDArray[np.float32] | None = None
    ) -> Relevance:
        """`relevance` of a text given its vector (dense modes) rather than its cosine."""
        if self.mode == "lexical" or self.abstains:
            return self.relevance(text_terms)
        if text_vector is None or self.query_vector is None:
            msg = "dense and hybrid scores need the text's vector; use score_texts to embed it"
            raise ValueError(msg)
        return self.relevance(text_terms, float(np.dot(self.query_vector, text_vector)))

    def relevances_given(
        self, terms: Sequence[Sequence[str]], texts: Sequence[str], cosines: Sequence[float | None]
    ) -> list[Relevance]:
        """`relevances_at` of texts given the cosines known (dense modes: from stored vectors);
        the texts without one are embedded in one batch."""
        if self.mode == "lexical" or self.abstains:
            return self.relevances_at(terms)
        known = list(cosines)
        missing = [i for i, c in enumerate(known) if c is None]
        if missing:
            if self.embedder is None or self.query_vector is None:
                msg = "dense and hybrid scores need the text's vector; use score_texts to embed it"
                raise ValueError(msg)
            fresh = self.embedder.embed([texts[i] for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                known[i] = float(np.dot(self.query_vector, vector))
        return self.relevances_at(terms, [c for c in known if c is not None])

    def score_cosine(self, text_terms: Sequence[str], cosine: float) -> float:
        """`score` with the text's cosine already computed (by a vector index), dense modes."""
        return self.relevance(text_terms, cosine).score

    def score_texts(
        self,
        texts: Sequence[str],
        vectors: Sequence[npt.NDArray[np.float32] | None] | None = None,
    ) -> list[float]:
        """Scores of many texts; missing vectors are embedded in one batch (dense modes)."""
        return [r.score for r in self.relevances([_analysis.terms(t) for t in texts], texts, vectors)]

    def relevances(
        self,
        terms: Sequence[Sequence[str]],
        texts: Sequence[str],
        vectors: Sequence[npt.NDArray[np.float32] | None] | None = None,
    ) -> list[Relevance]:
        """Relevance of many texts scored on `terms`; missing vectors are embedded in one batch."""
        if self.mode == "lexical" or self.abstains:
            return self.relevances_at(terms)
        query = self.query_vector
        given = list(vectors) if vectors is not None else [None] * len(texts)
        cosines = [None if v is None or query is None else float(np.dot(query, v)) for v in given]
        return self.relevances_given(terms, texts, cosines)
