"""Fitted constants of the one calibrated scale: per recall mode, the base relevance of a
memory, the QPP gate of a task and the band of a memory (sources._relevance, sources._gate).

Written by benchmarks/fit_calibration.py on the dev data; do not edit by hand.
"""

from __future__ import annotations

# lexical base features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, peak_specificity.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    -3.557337,
    -0.966272,
    4.147357,
    -2.540520,
    1.740027,
    0.583078,
    0.526778,
    3.576746,
)
LEXICAL_BIAS: float = -7.636760

# lexical qpp features: presence, log1p(terms), question mark, first person, log1p(namespace documents), best base logit, its margin over the second, best bm25_norm, best coverage.
LEXICAL_QPP_WEIGHTS: tuple[float, ...] = (
    0.847735,
    2.715929,
    3.042659,
    0.828845,
    -1.789179,
    1.102059,
    -0.345039,
    2.905059,
    1.215958,
)
LEXICAL_QPP_BIAS: float = 5.263356

# lexical band features: log1p(rank), base logit gap to the best, their product.
LEXICAL_BAND_WEIGHTS: tuple[float, ...] = (
    -1.152292,
    -0.339458,
    0.032984,
)
LEXICAL_BAND_BIAS: float = 1.505320

# dense base features: cosine, cosine * presence, presence, log1p(informative query terms), best_cosine_standing.
DENSE_WEIGHTS: tuple[float, ...] = (
    14.410287,
    -6.323285,
    3.420140,
    -0.006717,
    1.585692,
)
DENSE_BIAS: float = -11.417094

# dense qpp features: presence, log1p(terms), question mark, first person, log1p(namespace documents), best base logit, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence.
DENSE_QPP_WEIGHTS: tuple[float, ...] = (
    -1.899636,
    2.703609,
    1.937094,
    2.260455,
    -2.488534,
    2.088222,
    1.885663,
    -1.024446,
    -1.362157,
    0.389887,
    1.495776,
    2.460321,
)
DENSE_QPP_BIAS: float = 14.340656

# dense band features: log1p(rank), base logit gap to the best, their product, cosine gap to the best.
DENSE_BAND_WEIGHTS: tuple[float, ...] = (
    -0.475199,
    -1.059383,
    0.051872,
    -5.183439,
)
DENSE_BAND_BIAS: float = 3.061371

# hybrid base features: the eight lexical features, cosine, cosine * presence, best_cosine_standing, best_bm25_standing, bm25_shortfall, coverage_shortfall.
HYBRID_WEIGHTS: tuple[float, ...] = (
    0.749966,
    -6.036947,
    0.147991,
    -1.221291,
    3.163826,
    0.215989,
    1.017425,
    2.900586,
    12.222632,
    -5.600062,
    0.503330,
    0.412364,
    -1.062382,
    1.577971,
)
HYBRID_BIAS: float = -9.563546

# hybrid qpp features: presence, log1p(terms), question mark, first person, log1p(namespace documents), best base logit, its margin over the second, best bm25_norm, best coverage, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence.
HYBRID_QPP_WEIGHTS: tuple[float, ...] = (
    -1.713701,
    2.505006,
    1.853874,
    2.065682,
    -2.080658,
    1.064967,
    -0.687800,
    0.251920,
    0.871654,
    5.253114,
    -0.141639,
    -0.380825,
    2.520727,
    2.732388,
    4.250446,
)
HYBRID_QPP_BIAS: float = 5.056972

# hybrid band features: log1p(rank), base logit gap to the best, their product, cosine gap to the best.
HYBRID_BAND_WEIGHTS: tuple[float, ...] = (
    -0.719143,
    -1.048151,
    0.127772,
    -2.723710,
)
HYBRID_BAND_BIAS: float = 2.127342

# Band exponent per mode: the floor's edge keeps the evidence of BAND_COVERAGE of dev tasks.
BAND_EXPONENTS: dict[str, float] = {
    "lexical": 0.478027,
    "dense": 0.356437,
    "hybrid": 0.475358,
}
