"""Fitted constants of the one calibrated scale: per recall mode, the base relevance of a
memory, the QPP gate of a task and the band of a memory (sources._relevance, sources._gate).

Written by benchmarks/fit_calibration.py on the dev data; do not edit by hand.
"""

from __future__ import annotations

# lexical base features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, peak_specificity.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    -2.788783,
    -2.361203,
    6.405922,
    -2.345842,
    2.196430,
    0.741732,
    -0.332522,
    3.048659,
)
LEXICAL_BIAS: float = -10.680586

# lexical qpp features: presence, log1p(informative terms), first person, log(namespace documents + PRIOR_DOCS), log1p(names absent from the namespace), best base logit, best bm25_norm, term overlap with the off-topic tasks.
LEXICAL_QPP_WEIGHTS: tuple[float, ...] = (
    -2.243926,
    2.215087,
    -1.583192,
    -0.297300,
    -4.167663,
    1.591513,
    2.090839,
    -6.177588,
)
LEXICAL_QPP_BIAS: float = 6.935952

# lexical band features: log1p(rank), base logit gap to the best.
LEXICAL_BAND_WEIGHTS: tuple[float, ...] = (
    -0.378565,
    -0.389986,
)
LEXICAL_BAND_BIAS: float = 1.095009

# dense base features: cosine, cosine * presence, presence, log1p(informative query terms), best_cosine_standing.
DENSE_WEIGHTS: tuple[float, ...] = (
    12.135906,
    -3.609418,
    1.501731,
    0.357777,
    1.678749,
)
DENSE_BIAS: float = -10.455981

# dense qpp features: presence, log1p(informative terms), first person, log(namespace documents + PRIOR_DOCS), log1p(names absent from the namespace), best base logit, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, best cosine * log(namespace documents + PRIOR_DOCS), closeness to the off-topic tasks, its excess over OFFTOPIC_KNEE.
DENSE_QPP_WEIGHTS: tuple[float, ...] = (
    1.796732,
    2.014402,
    0.987106,
    -5.118917,
    -2.209321,
    -0.842378,
    -0.007281,
    -1.349735,
    -3.115591,
    -1.794937,
    1.787656,
    2.715471,
    5.074636,
    -6.912335,
    -1.548849,
)
DENSE_QPP_BIAS: float = 12.125179

# dense band features: log1p(rank), cosine gap to the best.
DENSE_BAND_WEIGHTS: tuple[float, ...] = (
    -0.023449,
    -18.871072,
)
DENSE_BAND_BIAS: float = 1.796337

# hybrid base features: the eight lexical features, cosine, cosine * presence, best_cosine_standing, best_bm25_standing, bm25_shortfall, coverage_shortfall.
HYBRID_WEIGHTS: tuple[float, ...] = (
    3.479082,
    -7.651687,
    -0.602311,
    -0.334633,
    1.541269,
    0.045143,
    1.028717,
    2.541426,
    12.527985,
    -4.423628,
    0.243030,
    0.663041,
    -1.435411,
    1.580979,
)
HYBRID_BIAS: float = -9.697194

# hybrid qpp features: presence, log1p(informative terms), first person, log(namespace documents + PRIOR_DOCS), log1p(names absent from the namespace), best base logit, its margin over the second, best bm25_norm, best coverage, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, best cosine * log(namespace documents + PRIOR_DOCS), closeness to the off-topic tasks, its excess over OFFTOPIC_KNEE.
HYBRID_QPP_WEIGHTS: tuple[float, ...] = (
    -0.407053,
    1.968171,
    0.982455,
    -4.687342,
    -2.216000,
    -0.251321,
    0.301318,
    -0.153302,
    2.006981,
    -0.682665,
    -2.058234,
    -3.628836,
    -2.472739,
    1.790075,
    2.835596,
    4.065555,
    -6.916125,
    -1.638369,
)
HYBRID_QPP_BIAS: float = 15.410824

# hybrid band features: log1p(rank), base logit gap to the best, cosine gap to the best.
HYBRID_BAND_WEIGHTS: tuple[float, ...] = (
    -0.293592,
    -0.525201,
    -3.311915,
)
HYBRID_BAND_BIAS: float = 1.341459

# Band exponent per mode: the floor's edge keeps the evidence of BAND_COVERAGE of dev tasks.
BAND_EXPONENTS: dict[str, float] = {
    "lexical": 0.481267,
    "dense": 0.353668,
    "hybrid": 0.367284,
}
