"""Tests of vectors as a search reads them (`sources.storage._quantised`): the float32
product, the 8-bit copies and their products, the shortlist."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sources.storage import _quantised
from sources.storage._quantised import approx_dot, dot, quantise, shortlist

_FLOATS = st.floats(-1, 1, width=32, allow_nan=False)
_MATRIX_AND_QUERY = st.integers(1, 64).flatmap(
    lambda d: st.tuples(
        hnp.arrays(np.float32, st.tuples(st.integers(0, 40), st.just(d)), elements=_FLOATS),
        hnp.arrays(np.float32, st.just(d), elements=_FLOATS),
    )
)
"""A matrix of 0-40 rows and a query of its dimension (1-64)."""


@settings(max_examples=60, deadline=None)
@given(_MATRIX_AND_QUERY)
def test_dot_is_every_rows_product_with_the_query(case: tuple[np.ndarray, np.ndarray]) -> None:
    """The exact search's product (einsum, no BLAS threads) is the matrix product, row by row."""
    buf, q = case
    got = dot(buf, q)
    assert got.dtype == np.float32
    assert got.shape == (len(buf),)
    np.testing.assert_allclose(got, buf.astype(np.float64) @ q.astype(np.float64), rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, st.tuples(st.integers(0, 30), st.integers(1, 64)), elements=_FLOATS))
def test_quantise_keeps_every_component_within_half_a_step_of_its_rows_scale(buf: np.ndarray) -> None:
    """A row is its 8-bit codes times its scale, each component within half its own row's step."""
    codes, scale = quantise(buf)
    assert codes.dtype == np.int8
    assert scale.dtype == np.float32
    assert (scale > 0).all()
    error = np.abs(codes.astype(np.float64) * scale[:, None] - buf)
    assert (error <= scale[:, None] / 2 * (1 + 1e-5) + 1e-12).all()


@settings(max_examples=60, deadline=None)
@given(_MATRIX_AND_QUERY)
def test_the_8_bit_product_is_within_its_quantisation_bound(case: tuple[np.ndarray, np.ndarray]) -> None:
    """`approx_dot` differs from the float product by at most what half a step of each side allows."""
    buf, q = case
    codes, scale = quantise(buf)
    got = approx_dot(codes, scale, q)
    assert got.shape == (len(buf),)
    (q_scale,) = quantise(q[None, :])[1]
    b64, q64 = buf.astype(np.float64), q.astype(np.float64)
    bound = (
        scale / 2 * np.abs(q64).sum()
        + q_scale / 2 * np.abs(b64).sum(axis=1)
        + buf.shape[1] * scale * q_scale / 4
    )
    assert (np.abs(got - b64 @ q64) <= bound * (1 + 1e-4) + 1e-6).all()


def test_the_shortlist_is_twice_k_and_at_least_k_plus_16() -> None:
    """Small k get 16 rows of margin, large k twice their number."""
    assert [shortlist(k) for k in (1, 10, 16, 40)] == [17, 26, 32, 80]


def test_quantise_clips_subnormal_rows_instead_of_wrapping() -> None:
    """A row of tiny magnitudes stays within +-127 steps of its own scale."""
    buf = np.array([[190 * 1.4e-45, 0.0, -1e-44], [1e-38, -3e-39, 0.0]], dtype=np.float32)
    codes, _ = quantise(buf)
    assert np.abs(codes.astype(np.int16)).max() <= 127
    assert np.sign(codes[1, 0]) >= 0
    assert np.sign(codes[1, 1]) <= 0


def test_quantise_in_blocks_equals_quantising_each_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few rows give the same codes and scales as one block."""
    rng = np.random.default_rng(2)
    buf = rng.standard_normal((23, 16)).astype(np.float32)
    whole = quantise(buf)
    monkeypatch.setattr(_quantised, "_QUANTISED_ROWS", 4)
    parts = quantise(buf)
    np.testing.assert_array_equal(whole[0], parts[0])
    np.testing.assert_array_equal(whole[1], parts[1])
