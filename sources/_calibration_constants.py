"""Fitted constants of the calibrated relevance scale, one logistic per recall mode.

Written by benchmarks/fit_calibration.py on the LoCoMo dev conversations; do not edit by hand.
"""

from __future__ import annotations

# lexical features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    2.759512,
    -2.781150,
    4.124267,
    -0.855030,
    -0.388291,
    0.767109,
)
LEXICAL_BIAS: float = -8.188445

# dense features: cosine, cosine * presence, presence, log1p(informative query terms).
DENSE_WEIGHTS: tuple[float, ...] = (
    13.928717,
    -4.082496,
    2.995728,
    -0.369140,
)
DENSE_BIAS: float = -11.134050

# hybrid features: the six lexical features, cosine, cosine * presence.
HYBRID_WEIGHTS: tuple[float, ...] = (
    5.670799,
    -7.753432,
    2.139227,
    -0.291320,
    0.838481,
    0.656964,
    7.964338,
    -2.810416,
)
HYBRID_BIAS: float = -10.131785
