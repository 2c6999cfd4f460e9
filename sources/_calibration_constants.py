"""Fitted constants of the calibrated relevance scale, one logistic per recall mode.

Written by benchmarks/fit_calibration.py on the LoCoMo dev conversations; do not edit by hand.
"""

from __future__ import annotations

# lexical features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, peak_specificity.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    -1.063084,
    -2.133612,
    4.843869,
    -2.317336,
    1.002110,
    0.164366,
    -0.319215,
    7.153503,
)
LEXICAL_BIAS: float = -10.272668

# dense features: cosine, cosine * presence, presence, log1p(informative query terms), best_cosine_standing.
DENSE_WEIGHTS: tuple[float, ...] = (
    14.631125,
    -7.423557,
    4.445870,
    -0.387210,
    1.644369,
)
DENSE_BIAS: float = -11.126901

# hybrid features: the eight lexical features, cosine, cosine * presence, best_cosine_standing, best_bm25_standing, bm25_shortfall, coverage_shortfall.
HYBRID_WEIGHTS: tuple[float, ...] = (
    -0.023038,
    -5.873635,
    -0.028426,
    -1.776066,
    5.358559,
    0.230037,
    1.092732,
    3.248184,
    13.639146,
    -8.363790,
    0.636213,
    0.374984,
    -0.763200,
    1.648315,
)
HYBRID_BIAS: float = -9.966949
