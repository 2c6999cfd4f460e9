"""Fitted constants of the one calibrated scale: per recall mode, the base relevance of a
memory, the QPP gate of a task and the band of a memory (sources._relevance, sources._gate).

Written by benchmarks/fit_calibration.py on the dev data; do not edit by hand.
"""

from __future__ import annotations

# lexical base features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, peak_specificity.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    0.957599,
    -3.082743,
    2.804637,
    -0.057888,
    -0.460938,
    0.148229,
    0.925622,
    3.984861,
)
LEXICAL_BIAS: float = -8.959386

# lexical qpp features: presence, log1p(informative terms), first person, log1p(namespace documents), best base logit, its margin over the second, best bm25_norm, best coverage, term overlap with the off-topic tasks.
LEXICAL_QPP_WEIGHTS: tuple[float, ...] = (
    1.777903,
    3.689405,
    0.766494,
    -0.433335,
    -0.055875,
    -0.043584,
    0.122825,
    5.515429,
    -4.511627,
)
LEXICAL_QPP_BIAS: float = -7.002502

# lexical band features: log1p(rank), base logit gap to the best.
LEXICAL_BAND_WEIGHTS: tuple[float, ...] = (
    -0.733658,
    -0.388046,
)
LEXICAL_BAND_BIAS: float = 1.852294

# dense base features: cosine, cosine * presence, presence, log1p(informative query terms), best_cosine_standing.
DENSE_WEIGHTS: tuple[float, ...] = (
    11.968645,
    -3.662237,
    1.476935,
    0.430048,
    1.745553,
)
DENSE_BIAS: float = -10.436645

# dense qpp features: presence, log1p(informative terms), first person, log1p(namespace documents), best base logit, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, best cosine * log1p(namespace documents), closeness to the off-topic tasks.
DENSE_QPP_WEIGHTS: tuple[float, ...] = (
    -2.145121,
    0.316192,
    1.417502,
    -2.810429,
    0.366916,
    1.689309,
    -3.128448,
    -3.858782,
    1.798686,
    -0.109376,
    4.075304,
    3.231763,
    -5.429863,
)
DENSE_QPP_BIAS: float = 8.752822

# dense band features: log1p(rank), cosine gap to the best.
DENSE_BAND_WEIGHTS: tuple[float, ...] = (
    -0.041229,
    -18.715168,
)
DENSE_BAND_BIAS: float = 1.827187

# hybrid base features: the eight lexical features, cosine, cosine * presence, best_cosine_standing, best_bm25_standing, bm25_shortfall, coverage_shortfall.
HYBRID_WEIGHTS: tuple[float, ...] = (
    3.547023,
    -7.677178,
    -0.676404,
    -0.264455,
    1.632843,
    0.042232,
    1.042077,
    2.490435,
    12.552985,
    -4.479088,
    0.282952,
    0.644813,
    -1.417827,
    1.672691,
)
HYBRID_BIAS: float = -9.729300

# hybrid qpp features: presence, log1p(informative terms), first person, log1p(namespace documents), best base logit, its margin over the second, best bm25_norm, best coverage, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, best cosine * log1p(namespace documents), closeness to the off-topic tasks.
HYBRID_QPP_WEIGHTS: tuple[float, ...] = (
    -2.057593,
    0.629984,
    1.430956,
    -2.953248,
    0.057853,
    0.026792,
    -2.035376,
    2.153526,
    2.284965,
    -2.975271,
    -3.655370,
    2.055805,
    0.229160,
    3.361679,
    3.632730,
    -5.119495,
)
HYBRID_QPP_BIAS: float = 5.979828

# hybrid band features: log1p(rank), base logit gap to the best, cosine gap to the best.
HYBRID_BAND_WEIGHTS: tuple[float, ...] = (
    -0.309941,
    -0.523165,
    -3.226531,
)
HYBRID_BAND_BIAS: float = 1.357421

# Band exponent per mode: the floor's edge keeps the evidence of BAND_COVERAGE of dev tasks.
BAND_EXPONENTS: dict[str, float] = {
    "lexical": 0.309552,
    "dense": 0.347409,
    "hybrid": 0.277471,
}
