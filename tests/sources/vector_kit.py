"""What the vector-index tests share: a dimension, a model id, a corpus, unit vectors, new
namespaces (their `engine` and `db` fixtures are in conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from broker import Namespace

if TYPE_CHECKING:
    from sources.storage._engine import Engine

DIM = 16
MODEL = "test-model"
FACTS = 1  # a corpus without the entries join, so rows need no entry


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    """`n` random unit vectors of DIM dimensions."""
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def new_namespaces(engine: Engine, n: int = 1) -> list[int]:
    """The ids of `n` new namespaces, a tenant each: on PostgreSQL their vectors then sit
    behind the tenant wall as a store's do (an id without a namespace row has no tenant)."""
    with engine.write() as conn:
        return [conn.ensure_namespace(Namespace(tenant_id=f"t{i}")) for i in range(n)]
