"""Tests of the in-memory matrix's exact arithmetic (`sources.storage._matrix`)."""

from __future__ import annotations

import numpy as np
import pytest
import structlog
import structlog.testing
from gc_kit import tracked_reachable
from hypothesis import given
from hypothesis import strategies as st

from sources.storage._matrix import Exact, Matrix, Row
from sources.storage._quantised import dot, quantise, to_blob
from sources.storage._runs import DenseRun, Hit


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


def _brute(buf: np.ndarray, keep: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    scores = dot(buf, q)
    return [int(i) for i in np.argsort(-scores, kind="stable") if keep[i]][:k]


@pytest.mark.parametrize("rows", [12, 30, 200])
@pytest.mark.parametrize("k", [1, 5, 11, 12, 40])
@pytest.mark.parametrize("masked", ["none", "alive", "tags", "both"])
def test_a_search_is_the_brute_force_top_k_of_the_rows_it_may_return(rows: int, k: int, masked: str) -> None:
    """With dead rows, typed rows or both, at k below, at and above the live rows, on either side
    of the shortlist: the float32 top-k of the allowed live rows, never another."""
    rng = np.random.default_rng(rows * 100 + k)
    buf = rng.standard_normal((rows, 24)).astype(np.float32)
    buf /= np.linalg.norm(buf, axis=1, keepdims=True)
    q = buf[3] + 0.3 * rng.standard_normal(24).astype(np.float32)
    alive = rng.random(rows) > 0.3 if masked in {"alive", "both"} else None
    tags = rng.integers(0, 3, rows).astype(np.int16) if masked in {"tags", "both"} else None
    allowed = np.array([0, 2], dtype=np.int16) if tags is not None else None
    i8, i8_scale = quantise(buf)
    rowids = np.arange(rows, dtype=np.int64)
    exact = Exact(buf=buf, i8=i8, i8_scale=i8_scale, rowids=rowids, alive=alive, tags=tags, allowed=allowed)
    keep = np.ones(rows, dtype=np.bool_) if alive is None else alive.copy()
    if tags is not None:
        keep &= np.isin(tags, allowed)
    scores = exact.approx(q)
    before = scores.copy()
    want = _brute(buf, keep, q, k)
    assert [h.rowid for h in exact.search(q, k)] == want
    assert [h.rowid for h in exact.search(q, k, scores)] == want
    np.testing.assert_array_equal(scores, before)  # the caller's scores are never modified


def test_rows_holding_nan_rank_last_and_never_let_a_masked_row_in() -> None:
    """A NaN row quantises without a warning to a NaN product, ranks below every live row, and a
    dead or disallowed row is still never returned."""
    rng = np.random.default_rng(8)
    buf = rng.standard_normal((40, 8)).astype(np.float32)
    buf /= np.linalg.norm(buf, axis=1, keepdims=True)
    buf[5] = np.nan
    buf[6, 2] = np.inf
    codes, scale = quantise(buf)  # the suite turns warnings into errors
    assert np.isnan(scale[[5, 6]]).all()
    assert (codes[[5, 6]] == 0).all()
    tags = np.ones(40, dtype=np.int16)
    tags[0] = 2
    exact = Exact(
        buf=buf, i8=codes, i8_scale=scale, rowids=np.arange(40, dtype=np.int64), alive=None,
        tags=tags, allowed=np.array([0, 1], dtype=np.int16),
    )  # fmt: skip
    hits = exact.search(buf[0], 30)
    assert 0 not in [h.rowid for h in hits]
    assert len(hits) == 30
    assert all(np.isfinite(h.cosine) for h in exact.search(buf[1], 5))


def test_a_growing_matrix_keeps_its_8_bit_copy_equal_to_its_rows() -> None:
    """Appends past the first capacity (64 rows) and replaced rows keep `i8` and `i8_scale`
    equal to quantising the float32 rows, and searches agree with brute force."""
    rng = np.random.default_rng(6)
    matrix = Matrix(dim=16, exact_limit=10_000)
    vid = 0
    for size in (10, 60, 150):
        vecs = rng.standard_normal((size, 16)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rows = [(vid + i + 1, (vid + i) % 180, "m", to_blob(v), None) for i, v in enumerate(vecs)]
        vid += size
        matrix.append(rows, "m")
    codes, scale = quantise(matrix.buf[: matrix.n])
    np.testing.assert_array_equal(matrix.i8[: matrix.n], codes)
    np.testing.assert_array_equal(matrix.i8_scale[: matrix.n], scale)
    q = matrix.buf[7]
    keep = matrix.alive[: matrix.n]
    want = [int(matrix.rowids[i]) for i in _brute(matrix.buf[: matrix.n], keep, q, 10)]
    assert [h.rowid for h in matrix.search(q, 10, None)] == want


@given(
    st.lists(
        st.tuples(st.integers(1, 2**40), st.floats(-1.0, 1.0, allow_nan=False)),
        max_size=60,
        unique_by=lambda p: p[0],
    ),
    st.integers(0, 70),
)
def test_a_dense_run_gives_back_the_hits_it_packed(pairs: list[tuple[int, float]], depth: int) -> None:
    """Packed as two arrays, a search's hits come back the same, best first, to any depth."""
    hits = [Hit(rowid=r, cosine=c) for r, c in pairs]
    run = DenseRun.pack(hits)
    assert run.head(depth).hits() == tuple(hits[:depth])
    assert run.head(depth).cosine_of() == {h.rowid: h.cosine for h in hits[:depth]}
    assert run == DenseRun.pack(list(hits))
    assert tracked_reachable(run) == 1


def test_a_damaged_stored_vector_is_left_out_and_logged() -> None:
    """A stored vector of another length or holding NaN (written around the checked embedder)
    is never searched and never reaches the mean cosine; a warning names its id."""
    rng = np.random.default_rng(31)
    good = rng.standard_normal((3, 8)).astype(np.float32)
    good /= np.linalg.norm(good, axis=1, keepdims=True)
    nan = good[0].copy()
    nan[2] = np.nan
    rows: list[Row] = [
        (1, 10, "m", to_blob(good[0]), None),
        (2, 11, "m", to_blob(good[1][:7]), None),  # one value short
        (3, 12, "m", to_blob(nan), None),
        (4, 13, "m", to_blob(good[2]), None),
    ]
    matrix = Matrix(dim=8, exact_limit=100)
    with structlog.testing.capture_logs() as logs:
        matrix.append(rows, "m")
    assert (matrix.n, matrix.live) == (2, 2)
    assert {h.rowid for h in matrix.search(good[1], 4, None)} == {10, 13}
    assert np.isfinite(matrix.mean_cosine(good[0]))
    (warning,) = [e for e in logs if e["event"] == "store.vectors.damaged"]
    assert (warning["vector_ids"], warning["count"]) == ([2, 3], 2)
