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

# dense features: cosine, cosine * presence, presence, log1p(informative query terms).
DENSE_WEIGHTS: tuple[float, ...] = (
    14.447286,
    -6.159247,
    3.810856,
    -0.423834,
)
DENSE_BIAS: float = -10.922840

# hybrid features: the eight lexical features, cosine, cosine * presence.
HYBRID_WEIGHTS: tuple[float, ...] = (
    1.126224,
    -5.692814,
    -0.298179,
    -1.697300,
    4.380068,
    0.213463,
    1.275744,
    3.638063,
    13.980525,
    -8.349801,
)
HYBRID_BIAS: float = -10.175992
