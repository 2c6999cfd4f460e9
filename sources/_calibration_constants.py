"""Fitted constants of the calibrated relevance scale, one logistic per recall mode.

Written by benchmarks/fit_calibration.py on the LoCoMo dev conversations; do not edit by hand.
"""

from __future__ import annotations

# lexical features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, peak_specificity.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    -1.006258,
    -2.115181,
    4.798353,
    -2.297567,
    0.971556,
    0.161825,
    -0.303541,
    7.033031,
)
LEXICAL_BIAS: float = -10.151494

# dense features: cosine, cosine * presence, presence, log1p(informative query terms).
DENSE_WEIGHTS: tuple[float, ...] = (
    14.349319,
    -6.057849,
    3.758188,
    -0.423777,
)
DENSE_BIAS: float = -10.871936

# hybrid features: the eight lexical features, cosine, cosine * presence.
HYBRID_WEIGHTS: tuple[float, ...] = (
    1.157440,
    -5.582348,
    -0.260699,
    -1.673036,
    4.317821,
    0.205597,
    1.276886,
    3.555241,
    13.861105,
    -8.247886,
)
HYBRID_BIAS: float = -10.114650
