"""Tests of the in-memory matrix's exact arithmetic (`sources._matrix`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sources._matrix import Exact, approx_dot, dot, quantise, shortlist

_FLOATS = st.floats(-1, 1, width=32, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 64).flatmap(
        lambda d: st.tuples(
            hnp.arrays(np.float32, st.tuples(st.integers(0, 40), st.just(d)), elements=_FLOATS),
            hnp.arrays(np.float32, st.just(d), elements=_FLOATS),
        )
    )
)
def test_dot_is_every_rows_product_with_the_query(case: tuple[np.ndarray, np.ndarray]) -> None:
    """The exact search's product (einsum, no BLAS threads) is the matrix product, row by row."""
    buf, q = case
    got = dot(buf, q)
    assert got.dtype == np.float32
    assert got.shape == (len(buf),)
    np.testing.assert_allclose(got, buf.astype(np.float64) @ q.astype(np.float64), rtol=1e-5, atol=1e-5)


def _exact(buf: np.ndarray, alive: np.ndarray | None = None) -> Exact:
    i8, i8_scale = quantise(buf)
    rowids = np.arange(100, 100 + len(buf), dtype=np.int64)
    return Exact(buf=buf, i8=i8, i8_scale=i8_scale, rowids=rowids, alive=alive, tags=None, allowed=None)


def test_an_exact_search_ranks_the_live_rows_by_their_product() -> None:
    """Top-k of the live rows, best first, each with its float32 cosine from `dot`."""
    rng = np.random.default_rng(4)
    buf = rng.standard_normal((50, 8)).astype(np.float32)
    q = rng.standard_normal(8).astype(np.float32)
    alive = np.ones(50, dtype=np.bool_)
    alive[::3] = False
    exact = _exact(buf, alive)
    hits = exact.search(q, 7)
    scores = dot(buf, q)
    order = [i for i in np.argsort(-scores, kind="stable") if alive[i]][:7]
    assert [h.rowid for h in hits] == [100 + int(i) for i in order]
    assert [h.cosine for h in hits] == [float(scores[i]) for i in order]


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
@given(
    st.integers(1, 64).flatmap(
        lambda d: st.tuples(
            hnp.arrays(np.float32, st.tuples(st.integers(0, 40), st.just(d)), elements=_FLOATS),
            hnp.arrays(np.float32, st.just(d), elements=_FLOATS),
        )
    )
)
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


def test_an_exact_search_returns_the_float32_top_k_of_unit_vectors() -> None:
    """Over MiniLM-like unit vectors the re-scored shortlist gives the float32 top-k exactly."""
    rng = np.random.default_rng(11)
    buf = rng.standard_normal((3_000, 384)).astype(np.float32)
    buf /= np.linalg.norm(buf, axis=1, keepdims=True)
    exact = _exact(buf)
    for i in range(40):
        q = buf[i] + 0.5 * rng.standard_normal(384).astype(np.float32)
        q /= np.linalg.norm(q)
        scores = dot(buf, q)
        want = np.argsort(-scores, kind="stable")[:10]
        hits = exact.search(q, 10)
        assert [h.rowid for h in hits] == [100 + int(j) for j in want]
        assert [h.cosine for h in hits] == scores[want].tolist()


def test_a_search_of_gathered_rows_re_scores_from_the_rows_it_was_given() -> None:
    """With `at`, row i of the snapshot is `buf[at[i]]`: hits name the gathered rows' ids and cosines."""
    rng = np.random.default_rng(5)
    buf = rng.standard_normal((60, 16)).astype(np.float32)
    q = rng.standard_normal(16).astype(np.float32)
    at = np.arange(1, 60, 2)
    i8, i8_scale = quantise(buf[at])
    exact = Exact(
        buf=buf,
        i8=i8,
        i8_scale=i8_scale,
        rowids=at.astype(np.int64),
        alive=None,
        tags=None,
        allowed=None,
        at=at,
    )
    hits = exact.search(q, 5)
    scores = dot(buf, q)
    want = sorted(at.tolist(), key=lambda j: -scores[j])[:5]
    assert [h.rowid for h in hits] == want
    assert [h.cosine for h in hits] == [float(scores[j]) for j in want]


def test_the_shortlist_is_twice_k_and_at_least_k_plus_16() -> None:
    """Small k get 16 rows of margin, large k twice their number."""
    assert [shortlist(k) for k in (1, 10, 16, 40)] == [17, 26, 32, 80]
