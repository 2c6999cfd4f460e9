"""What the vector-index tests share: a dimension, a model id, a corpus, unit vectors (their
`db` fixture is in conftest.py)."""

from __future__ import annotations

import numpy as np

DIM = 16
MODEL = "test-model"
FACTS = 1  # a corpus without the entries join, so rows need no entry


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    """`n` random unit vectors of DIM dimensions."""
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit
