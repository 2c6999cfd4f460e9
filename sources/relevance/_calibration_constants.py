"""Fitted constants of the one calibrated scale: per recall mode, the base relevance of a
memory, the QPP gate of a task and the band of a memory (sources.relevance._relevance, sources.relevance._gate).

Written by benchmarks/fit_calibration.py on the dev data; do not edit by hand.
"""

from __future__ import annotations

# lexical base features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, peak_specificity.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    -2.465987,
    1.929712,
    3.932020,
    -0.353342,
    0.615034,
    0.572960,
    1.976131,
    1.829818,
)
LEXICAL_BIAS: float = -10.517697

# lexical qpp features: presence, log1p(informative terms), first person, log(namespace documents + PRIOR_DOCS), log1p(names absent from the namespace), best base logit, best bm25_norm, term overlap with the off-topic tasks, its excess over OFFTOPIC_KNEE.
LEXICAL_QPP_WEIGHTS: tuple[float, ...] = (
    0.661699,
    1.786590,
    -0.556512,
    -1.327479,
    -4.130782,
    1.377834,
    5.399194,
    -8.361607,
    -0.106609,
)
LEXICAL_QPP_BIAS: float = 10.155154

# lexical band features: log1p(rank), base logit gap to the best.
LEXICAL_BAND_WEIGHTS: tuple[float, ...] = (
    -0.020155,
    -0.640968,
)
LEXICAL_BAND_BIAS: float = 0.882551

# dense base features: cosine, cosine * presence, presence, log1p(informative query terms), best_cosine_standing.
DENSE_WEIGHTS: tuple[float, ...] = (
    12.135571,
    -3.570514,
    1.495445,
    0.387864,
    1.659148,
)
DENSE_BIAS: float = -10.508402

# dense qpp features: presence, log1p(informative terms), first person, log(namespace documents + PRIOR_DOCS), log1p(names absent from the namespace), best base logit, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, best cosine * log(namespace documents + PRIOR_DOCS), closeness to the off-topic tasks, its excess over OFFTOPIC_KNEE.
DENSE_QPP_WEIGHTS: tuple[float, ...] = (
    1.787418,
    2.048013,
    0.984136,
    -5.130067,
    -2.236745,
    -0.850306,
    -0.019029,
    -1.366092,
    -3.253202,
    -1.758257,
    1.739229,
    2.735116,
    5.097599,
    -6.840678,
    -1.616638,
)
DENSE_QPP_BIAS: float = 12.065253

# dense band features: log1p(rank), cosine gap to the best.
DENSE_BAND_WEIGHTS: tuple[float, ...] = (
    -0.016549,
    -18.933962,
)
DENSE_BAND_BIAS: float = 1.786766

# hybrid base features: the eight lexical features, cosine, cosine * presence, best_cosine_standing, best_bm25_standing, bm25_shortfall, coverage_shortfall.
HYBRID_WEIGHTS: tuple[float, ...] = (
    3.418781,
    -7.658834,
    -0.537282,
    -0.338576,
    1.521136,
    0.052799,
    1.006394,
    2.547821,
    12.454691,
    -4.341153,
    0.242933,
    0.665401,
    -1.400405,
    1.586017,
)
HYBRID_BIAS: float = -9.697309

# hybrid qpp features: presence, log1p(informative terms), first person, log(namespace documents + PRIOR_DOCS), log1p(names absent from the namespace), best base logit, its margin over the second, best bm25_norm, best coverage, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence, best cosine * log(namespace documents + PRIOR_DOCS), closeness to the off-topic tasks, its excess over OFFTOPIC_KNEE.
HYBRID_QPP_WEIGHTS: tuple[float, ...] = (
    -0.448440,
    1.982614,
    0.982701,
    -4.695477,
    -2.243991,
    -0.251983,
    0.303799,
    -0.159618,
    2.046976,
    -0.708618,
    -2.092787,
    -3.776458,
    -2.457783,
    1.749165,
    2.868531,
    4.077117,
    -6.852285,
    -1.706769,
)
HYBRID_QPP_BIAS: float = 15.440013

# hybrid band features: log1p(rank), base logit gap to the best, cosine gap to the best.
HYBRID_BAND_WEIGHTS: tuple[float, ...] = (
    -0.293031,
    -0.533380,
    -3.331643,
)
HYBRID_BAND_BIAS: float = 1.377630

# Band exponents per mode, (small stores, long conversations): the floor's edge keeps the
# evidence of BAND_COVERAGE of dev tasks, with at most BAND_MEAN_MAX memories above it.
BAND_EXPONENTS: dict[str, tuple[float, float]] = {
    "lexical": (1.013833, 0.494481),
    "dense": (0.337424, 0.596048),
    "hybrid": (0.349494, 0.352420),
}
# Per mode, the band sizes (sources.relevance._gate.band_size) up to and from which the two exponents
# hold (the largest small store, the smallest long conversation fitted); linear between.
BAND_EXPONENT_SIZES: dict[str, tuple[float, float]] = {
    "lexical": (0.405465, 1.545433),
    "dense": (0.576613, 1.545433),
    "hybrid": (0.576613, 1.545433),
}
# Per mode, the largest namespace size (sources.relevance._gate.namespace_size, log(documents +
# PRIOR_DOCS)) the gate was fitted on, which a larger namespace reads as (None: read unclipped).
QPP_SIZE_MAX: dict[str, float | None] = {
    "lexical": None,
    "dense": 7.020191,
    "hybrid": 7.020191,
}
