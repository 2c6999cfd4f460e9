"""Fitted constants of the calibrated relevance model (written by
benchmarks/fit_calibration.py on the LoCoMo dev conversations; do not edit by hand)."""

from __future__ import annotations

# Features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit.
LEXICAL_WEIGHTS: tuple[float, ...] = (2.759512, -2.781150, 4.124267, -0.855030, -0.388291, 0.767109)
LEXICAL_BIAS: float = -8.188445

# Placeholders until benchmarks/fit_calibration.py --mode all --write runs.
DENSE_WEIGHTS: tuple[float, ...] = (10.0, 0.0, 0.0, 0.0)
DENSE_BIAS: float = -8.0
HYBRID_WEIGHTS: tuple[float, ...] = (2.759512, -2.781150, 4.124267, -0.855030, -0.388291, 0.767109, 0.0, 0.0)
HYBRID_BIAS: float = -8.188445
