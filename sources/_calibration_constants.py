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

# lexical qpp features: presence, log1p(informative terms), best base logit, its margin over the second, best bm25_norm, best coverage.
LEXICAL_QPP_WEIGHTS: tuple[float, ...] = (
    1.661925,
    5.615853,
    0.036885,
    -0.016802,
    1.954840,
    4.636831,
)
LEXICAL_QPP_BIAS: float = -13.652511

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

# dense qpp features: presence, log1p(informative terms), best base logit, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence.
DENSE_QPP_WEIGHTS: tuple[float, ...] = (
    -3.117799,
    2.163279,
    1.073122,
    2.465429,
    -0.020999,
    2.899742,
    1.150081,
    1.315349,
    5.274909,
)
DENSE_QPP_BIAS: float = -2.330142

# dense band features: log1p(rank), cosine gap to the best.
DENSE_BAND_WEIGHTS: tuple[float, ...] = (
    -0.037055,
    -18.752476,
)
DENSE_BAND_BIAS: float = 1.820548

# hybrid base features: the eight lexical features, cosine, cosine * presence, best_cosine_standing, best_bm25_standing, bm25_shortfall, coverage_shortfall.
HYBRID_WEIGHTS: tuple[float, ...] = (
    3.673582,
    -7.923127,
    -0.671956,
    -0.267140,
    1.646338,
    0.041286,
    1.019054,
    2.484349,
    12.567897,
    -4.499167,
    0.260802,
    0.679291,
    -1.203750,
    1.582328,
)
HYBRID_BIAS: float = -9.724534

# hybrid qpp features: presence, log1p(informative terms), best base logit, its margin over the second, best bm25_norm, best coverage, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence.
HYBRID_QPP_WEIGHTS: tuple[float, ...] = (
    -3.065611,
    2.811430,
    0.335310,
    0.026660,
    -0.298237,
    1.559444,
    5.937908,
    -0.074258,
    2.733733,
    2.742142,
    3.195765,
    6.053780,
)
HYBRID_QPP_BIAS: float = -9.344880

# hybrid band features: log1p(rank), base logit gap to the best, cosine gap to the best.
HYBRID_BAND_WEIGHTS: tuple[float, ...] = (
    -0.308246,
    -0.523751,
    -3.234634,
)
HYBRID_BAND_BIAS: float = 1.354594

# Band exponent per mode: the floor's edge keeps the evidence of BAND_COVERAGE of dev tasks.
BAND_EXPONENTS: dict[str, float] = {
    "lexical": 0.289492,
    "dense": 0.314795,
    "hybrid": 0.269339,
}
