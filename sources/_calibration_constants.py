"""Fitted constants of the one calibrated scale: per recall mode, the base relevance of a
memory, the QPP gate of a task and the band of a memory (sources._relevance, sources._gate).

Written by benchmarks/fit_calibration.py on the dev data; do not edit by hand.
"""

from __future__ import annotations

# lexical base features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, peak_specificity.
LEXICAL_WEIGHTS: tuple[float, ...] = (
    -1.669533,
    -0.670899,
    3.962452,
    -1.455663,
    -0.231197,
    0.268050,
    0.340803,
    5.879058,
)
LEXICAL_BIAS: float = -8.845511

# lexical qpp features: presence, log1p(terms), question mark, first person, log1p(namespace documents), best base logit, its margin over the second, best bm25_norm, best coverage.
LEXICAL_QPP_WEIGHTS: tuple[float, ...] = (
    1.256214,
    4.455706,
    2.600894,
    0.456591,
    -1.788361,
    0.280378,
    -0.193486,
    2.700689,
    4.725127,
)
LEXICAL_QPP_BIAS: float = -1.925162

# lexical band features: log1p(rank), base logit gap to the best, their product.
LEXICAL_BAND_WEIGHTS: tuple[float, ...] = (
    -1.217073,
    -0.574327,
    0.133986,
)
LEXICAL_BAND_BIAS: float = 2.489871

# dense base features: cosine, cosine * presence, presence, log1p(informative query terms), best_cosine_standing.
DENSE_WEIGHTS: tuple[float, ...] = (
    11.755122,
    -3.438960,
    1.032591,
    0.504058,
    1.853701,
)
DENSE_BIAS: float = -10.158646

# dense qpp features: presence, log1p(terms), question mark, first person, log1p(namespace documents), best base logit, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence.
DENSE_QPP_WEIGHTS: tuple[float, ...] = (
    -2.470991,
    2.270062,
    2.221861,
    2.103291,
    -2.933618,
    2.331954,
    1.963805,
    -3.867380,
    -3.940381,
    -0.382122,
    2.345927,
    4.293467,
)
DENSE_QPP_BIAS: float = 17.893981

# dense band features: log1p(rank), base logit gap to the best, their product, cosine gap to the best.
DENSE_BAND_WEIGHTS: tuple[float, ...] = (
    -0.272669,
    0.025540,
    0.081814,
    -20.809597,
)
DENSE_BAND_BIAS: float = 2.053449

# hybrid base features: the eight lexical features, cosine, cosine * presence, best_cosine_standing, best_bm25_standing, bm25_shortfall, coverage_shortfall.
HYBRID_WEIGHTS: tuple[float, ...] = (
    4.771850,
    -8.306988,
    -1.180218,
    0.096965,
    1.139906,
    -0.030490,
    1.145762,
    2.363628,
    13.137811,
    -4.536224,
    0.329568,
    0.709133,
    -1.311851,
    1.478328,
)
HYBRID_BIAS: float = -9.820202

# hybrid qpp features: presence, log1p(terms), question mark, first person, log1p(namespace documents), best base logit, its margin over the second, best bm25_norm, best coverage, best cosine, margin to the 2nd, to the 5th, best minus mean cosine, mean cosine, best cosine * presence.
HYBRID_QPP_WEIGHTS: tuple[float, ...] = (
    -2.241029,
    3.172503,
    2.065952,
    1.999930,
    -2.423982,
    0.822760,
    -0.565138,
    0.057766,
    2.265393,
    7.431565,
    -2.045370,
    -2.226517,
    2.682952,
    4.748612,
    6.099188,
)
HYBRID_QPP_BIAS: float = 3.154078

# hybrid band features: log1p(rank), base logit gap to the best, their product, cosine gap to the best.
HYBRID_BAND_WEIGHTS: tuple[float, ...] = (
    -0.603938,
    -0.860986,
    0.124168,
    -3.959612,
)
HYBRID_BAND_BIAS: float = 2.089509

# Band exponent per mode: the floor's edge keeps the evidence of BAND_COVERAGE of dev tasks.
BAND_EXPONENTS: dict[str, float] = {
    "lexical": 0.490443,
    "dense": 0.400503,
    "hybrid": 0.306237,
}
