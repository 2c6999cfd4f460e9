"""The `Scorer`: every source's one way to score a text for a task, on the one calibrated scale.

Built once per request (`MemoryStore.scorer_on`), with the namespace's `Reference` for the
task. A text's score is `qpp x band` (`sources._gate`): the task's gate, shared by every
candidate of the turn, times the text's standing against the namespace's best, derived
from its base relevance (`sources._relevance`) in the scorer's mode. An equal text gets an
equal score from every source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from broker import ConfigError

from . import _analysis, _gate
from ._relevance import (
    DENSE_MODES,
    NO_REFERENCE,
    QueryProfile,
    Reference,
    check_mode,
    dense_probability,
    hybrid_probability,
    lexical_probability,
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

    def base(self, text_terms: Sequence[str], cosine: float | None = None) -> float:
        """A text's base relevance in the scorer's mode (it orders candidates; not the score)."""
        if not self.profile.terms:
            return 0.0
        if self.mode == "lexical":
            return lexical_probability(self.reference.features(self.profile, text_terms))
        if cosine is None:
            msg = "dense and hybrid scores need the text's cosine"
            raise ValueError(msg)
        if self.mode == "dense":
            return dense_probability(self.profile, cosine, self.reference)
        return hybrid_probability(
            self.profile, self.reference.features(self.profile, text_terms), cosine, self.reference
        )

    def relevance(self, text_terms: Sequence[str], cosine: float | None = None) -> Relevance:
        """A text's score with its parts (`cosine` with the query in dense modes)."""
        if self.abstains:
            return ZERO
        base = self.base(text_terms, cosine)
        if base <= 0.0:
            return Relevance(score=0.0, qpp=self.qpp, band=0.0, base=0.0)
        features = _gate.band_features(self.mode, _gate.logit(base), cosine, self.reference)
        band = _gate.band_probability(self.mode, features)
        return Relevance(score=self.qpp * band, qpp=self.qpp, band=band, base=base)

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
        given: list[npt.NDArray[np.float32] | None] = (
            list(vectors) if vectors is not None else [None] * len(texts)
        )
        if self.mode != "lexical" and not self.abstains and self.embedder is not None:
            missing = [i for i, v in enumerate(given) if v is None]
            if missing:
                fresh = self.embedder.embed([texts[i] for i in missing])
                for i, vec in zip(missing, fresh, strict=True):
                    given[i] = vec
        return [self.relevance_of(t, v) for t, v in zip(terms, given, strict=True)]
