"""Fitted constants of the one calibrated scale: per recall mode, the base relevance of a
memory, the QPP gate of a task and the band of a memory (sources._relevance, sources._gate).

Written by benchmarks/fit_calibration.py on the dev data; do not edit by hand.
"""

from __future__ import annotations

# lexical base features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, peak_specificity.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    -1.310816,
    -1.081471,
    4.177662,
    -1.318353,
    -0.114623,
    0.280829,
    0.224417,
    5.484534,
)
LEXICAL_BIAS: float = -9.159053

# lexical qpp features: presence, log1p(informative terms), first person, log1p(namespace documents), best base logit, its margin over the second, best bm25_norm, best coverage, term overlap with the off-topic tasks.
LEXICAL_QPP_WEIGHTS: tuple[float, ...] = (
    1.447854,
    4.012304,
    0.545191,
    -1.811098,
    0.147484,
    -0.146100,
    1.837454,
    6.069704,
    -5.916652,
)
LEXICAL_QPP_BIAS: float = 1.372541

# lexical band features: log1p(rank), base logit gap to the best.
LEXICAL_BAND_WEIGHTS: tuple[float, ...] = (
    -0.827085,
    -0.293736,
)
LEXICAL_BAND_BIAS: float = 1.903061

# dense base features: cosine, cosine * presence, presence, log1p(informative query terms), best_cosine_standing.
DENSE_WEIGHTS: tuple[float, ...] = (
    12.166499,
    -3.698039,
    1.566913,
    0.370433,
    1.702808,
)
DENSE_BIAS: float = -10.509433

# dense qpp features: presence, log1p(informative terms), first person, log1p(namespace documents), best base logit, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, best cosine * log1p(namespace documents), closeness to the off-topic tasks.
DENSE_QPP_WEIGHTS: tuple[float, ...] = (
    -0.519989,
    1.666181,
    2.649135,
    -5.063210,
    0.792845,
    0.883299,
    -2.997218,
    -3.737306,
    -0.247183,
    1.130482,
    2.946973,
    4.120941,
    -7.457267,
)
DENSE_QPP_BIAS: float = 19.565890

# dense band features: log1p(rank), cosine gap to the best.
DENSE_BAND_WEIGHTS: tuple[float, ...] = (
    -0.041215,
    -18.715297,
)
DENSE_BAND_BIAS: float = 1.827167

# hybrid base features: the eight lexical features, cosine, cosine * presence, best_cosine_standing, best_bm25_standing, bm25_shortfall, coverage_shortfall.
HYBRID_WEIGHTS: tuple[float, ...] = (
    3.471667,
    -7.663401,
    -0.627732,
    -0.317753,
    1.622032,
    0.049043,
    1.033718,
    2.536214,
    12.589411,
    -4.497049,
    0.276735,
    0.658664,
    -1.440992,
    1.620907,
)
HYBRID_BIAS: float = -9.742138

# hybrid qpp features: presence, log1p(informative terms), first person, log1p(namespace documents), best base logit, its margin over the second, best bm25_norm, best coverage, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, best cosine * log1p(namespace documents), closeness to the off-topic tasks.
HYBRID_QPP_WEIGHTS: tuple[float, ...] = (
    -0.811087,
    2.284403,
    2.786810,
    -5.198582,
    0.234834,
    -0.041705,
    -0.492851,
    2.381007,
    1.430923,
    -2.632385,
    -3.499889,
    -0.086300,
    1.517223,
    2.396036,
    4.855007,
    -7.193513,
)
HYBRID_QPP_BIAS: float = 14.190631

# hybrid band features: log1p(rank), base logit gap to the best, cosine gap to the best.
HYBRID_BAND_WEIGHTS: tuple[float, ...] = (
    -0.309671,
    -0.523495,
    -3.203113,
)
HYBRID_BAND_BIAS: float = 1.366925

# Band exponent per mode: the floor's edge keeps the evidence of BAND_COVERAGE of dev tasks.
BAND_EXPONENTS: dict[str, float] = {
    "lexical": 0.287665,
    "dense": 0.346892,
    "hybrid": 0.364628,
}
