"""The one calibrated scale over arrays: many texts scored against one query at once.

A turn scores its candidates here, all of a source's (or of the namespace's pool) in one
pass of numpy: the query's term counts in every text come from one gather of the texts'
terms, then the features (`sources.relevance._relevance`), the base relevance and the band
(`sources.relevance._gate`) are columns, never a Python loop over candidates. The scalar functions of
those modules stay the definition (the fit computes its features with them); the tests hold
these to them on random queries and texts.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Final

import attrs
import numpy as np

from sources.storage._doc_terms import PackedTerms, shared_vocab

from . import _calibration_constants as constants
from . import _gate
from ._relevance import K1, TIE, B

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from ._relevance import QueryProfile, Reference

_N_LEXICAL: Final = 8
"""Columns of `LexicalMatrix.x`: `LexicalFeatures.vector()`'s order."""


@attrs.frozen(eq=False)
class LexicalMatrix:
    """`LexicalFeatures` of many texts against one profiled query, a row per text: `x` in
    the order of `LexicalFeatures.vector()` (log1p already applied), `matched` the count of
    the query's terms each text holds."""

    x: npt.NDArray[np.float64]
    matched: npt.NDArray[np.int64]

    @property
    def coverage(self) -> npt.NDArray[np.float64]:
        return self.x[:, 0]

    @property
    def bm25_norm(self) -> npt.NDArray[np.float64]:
        return self.x[:, 1]


def no_match(n: int) -> LexicalMatrix:
    """The features of `n` texts that share no term with the query (or of a query without one)."""
    return LexicalMatrix(x=np.zeros((n, _N_LEXICAL)), matched=np.zeros(n, dtype=np.int64))


def lexical_matrix(profile: QueryProfile, docs: Sequence[Sequence[str]]) -> LexicalMatrix:
    """`lexical_features(profile, d)` for every text `d` (its analysed terms), as one matrix."""
    n, q = len(docs), len(profile.terms)
    if n == 0 or q == 0 or profile.mass <= 0.0:
        return no_match(n)
    x = np.zeros((n, _N_LEXICAL))
    tf, lengths = _term_counts(profile.terms, docs)
    weights = np.fromiter((profile.idf[t] for t in profile.terms), np.float64, q)
    has = tf > 0.0
    matched = has.sum(axis=1)
    norm = K1 * (1.0 - B + B * lengths / max(profile.avgdl, 1e-9))
    # Unmatched terms add exact zeros, so each sum is the scalar one's (terms in query order).
    bm25 = (weights * tf * (K1 + 1.0) / (tf + norm[:, None])).sum(axis=1)
    ratio = weights / max(profile.max_idf, 1e-9)
    specific = has * ratio
    # The peak over the matched terms only (an IDF can be negative when the statistics lag).
    peak = np.where(has, ratio, -np.inf).max(axis=1)
    x[:, 0] = (has * weights).sum(axis=1) / profile.mass
    x[:, 1] = bm25 / (profile.mass * (K1 + 1.0))
    x[:, 2] = np.log1p(matched)
    x[:, 3] = np.log1p(q - matched)
    x[:, 4] = profile.presence
    if profile.rarest is not None:
        x[:, 5] = has[:, profile.terms.index(profile.rarest)]
    x[:, 6] = specific.sum(axis=1)
    x[:, 7] = np.where(matched > 0, peak, 0.0)
    return LexicalMatrix(x=x, matched=matched)


def _term_counts(
    terms: Sequence[str], docs: Sequence[Sequence[str]]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """How often each of the query's `terms` occurs in each text (texts x terms), and the
    texts' lengths: one pass over every token of the batch, counted by one bincount."""
    column = {t: j for j, t in enumerate(terms)}
    n, q = len(docs), len(terms)
    indexed = isinstance(docs, PackedTerms) or shared_vocab(docs) is not None
    packed = PackedTerms.pack(docs).id_form() if indexed else None
    if packed is not None:  # the texts index's own term ids: no string per token
        return _id_counts(column, (n, q), *packed)
    lengths = np.fromiter(map(len, docs), np.int64, n)
    tokens = itertools.chain.from_iterable(docs)
    codes = np.fromiter(map(column.get, tokens, itertools.repeat(-1)), np.int64, int(lengths.sum()))
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
    hit = codes >= 0
    counts = np.bincount(owner[hit] * q + codes[hit], minlength=n * q)
    return counts.reshape(n, q).astype(np.float64), lengths.astype(np.float64)


def _id_counts(
    column: dict[str, int],
    shape: tuple[int, int],
    vocab: Mapping[str, int],
    flat: npt.NDArray[np.int32],
    lengths: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """`_term_counts` (texts x terms: `shape`) of texts of one text index, their term ids one
    after another (`flat`)."""
    n = shape[0]
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
    counts = np.zeros(shape)  # a repeated query term counts in its last column, as below
    for term, j in column.items():
        word = vocab.get(term)
        if word is not None:
            counts[:, j] = np.bincount(owner[flat == word], minlength=n)
    return counts, lengths.astype(np.float64)


def logistic(weights: Sequence[float], bias: float, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """sigmoid(x . w + b) of each row, numerically safe (`_relevance.logistic` of each)."""
    if x.shape[1] != len(weights):
        msg = f"{x.shape[1]} features for {len(weights)} weights"
        raise ValueError(msg)
    # Column by column, in the weights' order: each row's sum is the scalar one's, whatever
    # the batch (a matrix product's kernel depends on the batch's shape).
    total = np.zeros(len(x))
    for j, weight in enumerate(weights):
        total += x[:, j] * weight
    z = bias + total
    e = np.exp(-np.abs(z))
    return np.where(z >= 0.0, 1.0 / (1.0 + e), e / (1.0 + e))


def logits(p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """`_gate.logit` of each."""
    q = np.clip(p, _gate.LOGIT_CLIP, 1.0 - _gate.LOGIT_CLIP)
    return np.log(q / (1.0 - q))


def base_probabilities(
    mode: str,
    profile: QueryProfile,
    lexical: LexicalMatrix,
    cosines: npt.NDArray[np.float64] | None,
    ref: Reference,
) -> npt.NDArray[np.float64]:
    """Each text's base relevance in `mode` (`Scorer.base`); `cosines` (dense modes) with the query."""
    n = len(lexical.matched)
    if not profile.terms:
        return np.zeros(n)
    if mode == "lexical" or cosines is None:
        p = logistic(constants.LEXICAL_WEIGHTS, constants.LEXICAL_BIAS, lexical.x)
        return np.where(lexical.matched > 0, p, 0.0)
    presence = profile.presence
    standing = _dense_standing(cosines, ref, presence)
    if mode == "dense":
        x = np.column_stack(
            [
                cosines,
                cosines * presence,
                np.full(n, presence),
                np.full(n, np.log1p(len(profile.terms))),
                standing,
            ]
        )
        return logistic(constants.DENSE_WEIGHTS, constants.DENSE_BIAS, x)
    best = (lexical.matched > 0) & (lexical.bm25_norm >= ref.best_bm25 - TIE)
    x = np.column_stack(
        [
            lexical.x,
            cosines,
            cosines * presence,
            standing,
            np.where(best, presence, 0.0),
            np.minimum(0.0, lexical.bm25_norm - ref.best_bm25),
            np.minimum(0.0, lexical.coverage - ref.best_coverage),
        ]
    )
    return logistic(constants.HYBRID_WEIGHTS, constants.HYBRID_BIAS, x)


def _dense_standing(
    cosines: npt.NDArray[np.float64], ref: Reference, presence: float
) -> npt.NDArray[np.float64]:
    """`_relevance.dense_relative` of each cosine."""
    if ref.best_cosine is None:
        return np.zeros(len(cosines))
    return np.where(cosines >= ref.best_cosine - TIE, presence, 0.0)


def rank_decays(log_ranks: npt.NDArray[np.float64], slope: float) -> npt.NDArray[np.float64]:
    """`_gate.rank_decay` of each of an array of log1p(rank)."""
    decays: npt.NDArray[np.float64] = np.exp(-slope * np.maximum(0.0, log_ranks - _gate.KNEE_LOG))
    return decays


def band_probabilities(
    mode: str,
    base_logits: npt.NDArray[np.float64],
    cosines: npt.NDArray[np.float64] | None,
    ref: Reference,
    size: float,
) -> npt.NDArray[np.float64]:
    """Each text's band (`_gate.band_probability` of `_gate.band_features`) in a namespace of
    `_gate.band_size` `size`."""
    pool = np.asarray(ref.pool, dtype=np.float64)
    # `pool` is descending: the rank counts the entries above base + tie (`_gate.rank_of`).
    rank = np.log1p(np.searchsorted(-pool, -(base_logits + _gate.RANK_TIE), side="left"))
    best = pool[0] if len(pool) else base_logits
    gap = np.maximum(0.0, best - base_logits - _gate.RANK_TIE)
    if mode == "lexical":
        x = np.column_stack([rank, gap])
    else:
        cos = np.zeros(len(base_logits)) if cosines is None else cosines
        top = ref.top_cosines[0] if ref.top_cosines else cos
        cos_gap = np.maximum(0.0, top - cos)
        x = np.column_stack([rank, cos_gap] if mode == "dense" else [rank, gap, cos_gap])
    weights, bias = _gate.fitted_band(mode)
    raw = logistic(weights, bias, x) / _gate.band_at_best(weights, bias)
    relative = np.where(np.isnan(raw), 0.0, np.minimum(1.0, raw))  # NaN (a NaN cosine): no standing
    decay = rank_decays(rank, _gate.decay_slope(mode, size))
    return np.asarray(relative ** _gate.band_exponent(mode, size) * decay, dtype=np.float64)


__all__ = [
    "LexicalMatrix",
    "band_probabilities",
    "base_probabilities",
    "lexical_matrix",
    "logits",
    "no_match",
    "rank_decays",
]
