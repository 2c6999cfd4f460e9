"""Fitted constants of the calibrated relevance scale, one logistic per recall mode.

Written by benchmarks/fit_calibration.py on the LoCoMo dev conversations; do not edit by hand.
"""

from __future__ import annotations

# lexical features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, peak_specificity, best_bm25_in_namespace, bm25_shortfall, coverage_shortfall.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    -1.334041,
    -2.086949,
    4.780690,
    -2.391860,
    1.317826,
    0.188230,
    -0.273885,
    6.983754,
    -0.427169,
    1.028269,
    0.107029,
)
LEXICAL_BIAS: float = -10.021389

# dense features: cosine, cosine * presence, presence, log1p(informative query terms), best_cosine_in_namespace.
DENSE_WEIGHTS: tuple[float, ...] = (
    13.987330,
    -6.697296,
    4.225324,
    -0.389012,
    1.520126,
)
DENSE_BIAS: float = -10.938831

# hybrid features: the eight lexical features, cosine, cosine * presence, best_cosine_in_namespace, best_bm25_in_namespace, bm25_shortfall, coverage_shortfall.
HYBRID_WEIGHTS: tuple[float, ...] = (
    -0.061228,
    -5.782752,
    -0.034504,
    -1.783963,
    5.329185,
    0.231004,
    1.107500,
    3.220560,
    13.435127,
    -8.125119,
    0.563558,
    0.300437,
    -0.720052,
    1.651715,
)
HYBRID_BIAS: float = -9.918520
