"""Tests of the in-memory matrix's exact arithmetic (`sources._matrix`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sources._matrix import Exact, dot

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


def test_an_exact_search_ranks_the_live_rows_by_their_product() -> None:
    """Top-k of the live rows, best first, each with its cosine from `dot`."""
    rng = np.random.default_rng(4)
    buf = rng.standard_normal((50, 8)).astype(np.float32)
    q = rng.standard_normal(8).astype(np.float32)
    alive = np.ones(50, dtype=np.bool_)
    alive[::3] = False
    exact = Exact(buf=buf, rowids=np.arange(100, 150, dtype=np.int64), alive=alive, tags=None, allowed=None)
    hits = exact.search(q, 7)
    scores = dot(buf, q)
    order = [i for i in np.argsort(-scores, kind="stable") if alive[i]][:7]
    assert [h.rowid for h in hits] == [100 + int(i) for i in order]
    assert [h.cosine for h in hits] == [float(scores[i]) for i in order]
