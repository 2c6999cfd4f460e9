"""A small, dependency-free logistic regression (Newton / IRLS with an L2 penalty) and the
expected calibration error, for fitting the calibrated relevance scale."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


def fit(
    x: Array, y: Array, *, l2: float = 1e-2, iters: int = 50, weights: Array | None = None
) -> tuple[Array, float]:
    """Weights and bias maximising the penalised (sample-weighted) log-likelihood."""
    n, d = x.shape
    s = np.ones(n) if weights is None else weights
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    penalty = np.eye(d + 1) * l2
    penalty[d, d] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (s * (p - y)) + penalty @ w
        hess = (xb * (s * p * (1 - p))[:, None]).T @ xb + penalty
        step = np.linalg.solve(hess + 1e-9 * np.eye(d + 1), grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w[:d], float(w[d])


def predict(x: Array, w: Array, b: float) -> Array:
    """Probabilities."""
    return 1.0 / (1.0 + np.exp(-(x @ w + b)))


def ece(p: Array, y: Array, bins: int = 10) -> float:
    """Expected calibration error over equal-width probability bins."""
    total = len(p)
    if total == 0:
        return float("nan")
    err = 0.0
    edges = np.linspace(0.0, 1.0, bins + 1)
    for i in range(bins):
        hi = edges[i + 1] if i < bins - 1 else 1.0 + 1e-12
        mask = (p >= edges[i]) & (p < hi)
        if mask.any():
            err += mask.sum() / total * abs(p[mask].mean() - y[mask].mean())
    return float(err)
