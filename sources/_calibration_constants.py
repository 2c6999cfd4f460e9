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

# lexical qpp features: presence, log1p(informative terms), first person, best base logit, its margin over the second, best bm25_norm, best coverage.
LEXICAL_QPP_WEIGHTS: tuple[float, ...] = (
    1.680946,
    5.720397,
    0.578782,
    0.052371,
    -0.026349,
    1.981220,
    4.727722,
)
LEXICAL_QPP_BIAS: float = -13.948256

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

# dense qpp features: presence, log1p(informative terms), first person, best base logit, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, closeness to the off-topic tasks.
DENSE_QPP_WEIGHTS: tuple[float, ...] = (
    -3.393481,
    1.390509,
    3.012338,
    1.464955,
    2.383374,
    -1.140743,
    0.507548,
    1.052313,
    1.331061,
    4.762466,
    -6.156632,
)
DENSE_QPP_BIAS: float = 2.313298

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

# hybrid qpp features: presence, log1p(informative terms), first person, best base logit, its margin over the second, best bm25_norm, best coverage, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, closeness to the off-topic tasks.
HYBRID_QPP_WEIGHTS: tuple[float, ...] = (
    -3.035542,
    2.111293,
    2.636282,
    0.440118,
    -0.057729,
    -0.538657,
    1.606950,
    6.732024,
    -0.735811,
    0.778765,
    3.125561,
    3.606463,
    6.119264,
    -5.851792,
)
HYBRID_QPP_BIAS: float = -6.759352

# hybrid band features: log1p(rank), base logit gap to the best, cosine gap to the best.
HYBRID_BAND_WEIGHTS: tuple[float, ...] = (
    -0.309941,
    -0.523165,
    -3.226531,
)
HYBRID_BAND_BIAS: float = 1.357421

# Band exponent per mode: the floor's edge keeps the evidence of BAND_COVERAGE of dev tasks.
BAND_EXPONENTS: dict[str, float] = {
    "lexical": 0.282990,
    "dense": 0.320677,
    "hybrid": 0.272410,
}
