"""Tests of the per-namespace vector index (exact and HNSW search, cache sync)."""

from __future__ import annotations

import sqlite3
import sys
from typing import TYPE_CHECKING

import numpy as np
import pytest
from vector_kit import DIM, FACTS, MODEL, unit_vectors

from sources import _vectors
from sources._sqlite import SqliteEngine, SqliteWriter
from sources._vectors import Slot

if TYPE_CHECKING:
    from pathlib import Path


def _put(db: SqliteEngine, ns_id: int, rowids: list[int], vecs: np.ndarray, model: str = MODEL) -> None:
    with db.write() as conn:
        conn.store_vectors(Slot(ns_id, FACTS), rowids, vecs, model)


def _search(
    db: SqliteEngine, index: _vectors.VectorIndex, ns_id: int, q: np.ndarray, k: int
) -> list[_vectors.Hit]:
    with db.read() as conn:
        return index.search(conn, Slot(ns_id, FACTS), q, k)


def test_exact_search_returns_true_top_k(db: SqliteEngine) -> None:
    """Exact search returns the k largest cosines, best first."""
    rng = np.random.default_rng(1)
    vecs = unit_vectors(rng, 40)
    _put(db, 1, list(range(100, 140)), vecs)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    q = vecs[7]
    hits = _search(db, index, 1, q, 5)
    expected = np.argsort(-(vecs @ q))[:5]
    assert [h.rowid for h in hits] == [100 + int(i) for i in expected]
    assert hits[0].cosine == pytest.approx(1.0, abs=1e-5)


def test_path_selection_by_size(db: SqliteEngine) -> None:
    """Up to the limit search is exact; past it, once warmed, an HNSW index answers the same best row."""
    pytest.importorskip("usearch")
    rng = np.random.default_rng(2)
    vecs = unit_vectors(rng, 60)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM, exact_limit=50)
    _put(db, 1, list(range(40)), vecs[:40])
    with db.read() as conn:
        assert not index.uses_ann(conn, Slot(1, FACTS))
    _put(db, 1, list(range(40, 60)), vecs[40:])
    with db.read() as conn:
        assert not index.uses_ann(conn, Slot(1, FACTS))  # crossed by writes: exact, no build in a search
        assert _search(db, index, 1, vecs[45], 1)[0].rowid == 45
        index.warm(conn, Slot(1, FACTS))
        assert index.uses_ann(conn, Slot(1, FACTS))
    for i in (3, 45, 59):
        assert _search(db, index, 1, vecs[i], 1)[0].rowid == i
    with db.write() as conn:
        conn.delete_vectors(FACTS, [45])
    assert 45 not in {h.rowid for h in _search(db, index, 1, vecs[45], 10)}
    with db.read() as conn:
        assert index.uses_ann(conn, Slot(1, FACTS))  # the delete cost no rebuild


def test_vectors_never_cross_namespaces(db: SqliteEngine) -> None:
    """A namespace's search returns only its own rows, even for an exact copy of another's vector."""
    rng = np.random.default_rng(3)
    a, b = unit_vectors(rng, 10), unit_vectors(rng, 10)
    _put(db, 1, list(range(10)), a)
    _put(db, 2, list(range(10, 20)), b)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    hits = _search(db, index, 2, a[0], 20)
    assert {h.rowid for h in hits} == set(range(10, 20))


def test_appends_by_anyone_are_seen(db: SqliteEngine, tmp_path: Path) -> None:
    """Rows written after the matrix loaded, even by another connection, are found by the next search."""
    rng = np.random.default_rng(4)
    vecs = unit_vectors(rng, 12)
    _put(db, 1, list(range(10)), vecs[:10])
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    assert _search(db, index, 1, vecs[10], 1)[0].rowid != 10
    other = sqlite3.connect(tmp_path / "v.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        SqliteWriter(other).store_vectors(Slot(1, FACTS), [10, 11], vecs[10:], MODEL)
        other.execute("COMMIT")
    finally:
        other.close()
    assert _search(db, index, 1, vecs[10], 1)[0].rowid == 10
    assert _search(db, index, 1, vecs[11], 1)[0].rowid == 11


def test_deletes_are_never_returned(db: SqliteEngine, tmp_path: Path) -> None:
    """A deleted vector disappears from a loaded index, whichever connection deleted it."""
    rng = np.random.default_rng(5)
    vecs = unit_vectors(rng, 10)
    _put(db, 1, list(range(10)), vecs)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    assert _search(db, index, 1, vecs[3], 1)[0].rowid == 3
    with db.write() as conn:
        conn.delete_vectors(FACTS, [3])
    assert 3 not in {h.rowid for h in _search(db, index, 1, vecs[3], 10)}
    other = sqlite3.connect(tmp_path / "v.db", isolation_level=None)
    try:
        other.execute("DELETE FROM vectors WHERE corpus = ? AND src_rowid = ?", (FACTS, 4))
    finally:
        other.close()
    assert 4 not in {h.rowid for h in _search(db, index, 1, vecs[4], 10)}
    assert len(_search(db, index, 1, vecs[0], 10)) == 8


def test_reused_rowids_cannot_hide_a_delete(db: SqliteEngine, tmp_path: Path) -> None:
    """Deleting the newest vector and writing one in its place (the leak recipe) is seen: ids are never reused."""
    rng = np.random.default_rng(11)
    vecs = unit_vectors(rng, 6)
    _put(db, 1, list(range(5)), vecs[:5])
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    assert _search(db, index, 1, vecs[4], 1)[0].rowid == 4
    other = sqlite3.connect(tmp_path / "v.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("DELETE FROM vectors WHERE corpus = ? AND src_rowid = ?", (FACTS, 4))
        SqliteWriter(other).store_vectors(Slot(1, FACTS), [7], vecs[5:6], MODEL)
        other.execute("COMMIT")
    finally:
        other.close()
    hits = _search(db, index, 1, vecs[4], 6)
    assert 4 not in {h.rowid for h in hits}
    assert {h.rowid for h in hits} == {0, 1, 2, 3, 7}
    fresh = _search(db, _vectors.VectorIndex(model_id=MODEL, dim=DIM), 1, vecs[4], 6)
    assert [h.rowid for h in hits] == [h.rowid for h in fresh]


def test_an_index_behind_the_kept_tombstones_reloads(db: SqliteEngine) -> None:
    """When the tombstones it needs were pruned, the index reloads instead of missing deletes."""
    rng = np.random.default_rng(12)
    vecs = unit_vectors(rng, 8)
    _put(db, 1, list(range(8)), vecs)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    assert _search(db, index, 1, vecs[2], 1)[0].rowid == 2
    with db.write() as conn:
        conn.delete_vectors(FACTS, [2, 3])
        conn.store_vectors(Slot(2, FACTS), [50], vecs[:1], MODEL)  # another namespace's delete
        conn.delete_vectors(FACTS, [50])
        conn.execute("DELETE FROM vector_tombstones WHERE id <= 2")  # as the prune trigger would
    assert {h.rowid for h in _search(db, index, 1, vecs[2], 8)} == {0, 1, 4, 5, 6, 7}


def test_replaced_vector_is_the_new_one(db: SqliteEngine) -> None:
    """Overwriting a row's vector (as reindex does) replaces it in the cache."""
    rng = np.random.default_rng(6)
    vecs = unit_vectors(rng, 6)
    _put(db, 1, list(range(5)), vecs[:5])
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    _search(db, index, 1, vecs[0], 1)
    _put(db, 1, [2], vecs[5:6])
    hits = _search(db, index, 1, vecs[5], 5)
    assert hits[0].rowid == 2
    assert hits[0].cosine == pytest.approx(1.0, abs=1e-5)
    assert len(hits) == 5


def test_other_model_rows_are_stale_and_ignored(db: SqliteEngine) -> None:
    """Vectors of another model are counted as stale and never searched."""
    rng = np.random.default_rng(7)
    vecs = unit_vectors(rng, 6)
    _put(db, 1, list(range(4)), vecs[:4])
    _put(db, 1, [4, 5], vecs[4:], model="old-model")
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    with db.read() as conn:
        assert index.stale(conn, Slot(1, FACTS)) == 2
    assert {h.rowid for h in _search(db, index, 1, vecs[4], 10)} == {0, 1, 2, 3}


def test_blob_round_trip() -> None:
    """A vector survives storage as float32 bytes exactly."""
    v = np.arange(DIM, dtype=np.float32) / 7
    np.testing.assert_array_equal(_vectors.from_blobs([_vectors.to_blob(v)], DIM)[0], v)


def test_store_vectors_rejects_mismatched_lengths(db: SqliteEngine) -> None:
    """Rowids and vectors must pair up; nothing is written otherwise."""
    with pytest.raises(ValueError, match="rowids"), db.write() as conn:
        conn.store_vectors(Slot(1, FACTS), [1, 2], unit_vectors(np.random.default_rng(8), 1), MODEL)
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0


def test_without_usearch_large_namespaces_stay_exact(
    db: SqliteEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the limit with usearch absent, search stays exact and correct instead of failing."""
    monkeypatch.setitem(sys.modules, "usearch.index", None)  # makes the import raise ImportError
    rng = np.random.default_rng(9)
    vecs = unit_vectors(rng, 30)
    _put(db, 1, list(range(30)), vecs)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM, exact_limit=10)
    with db.read() as conn:
        assert not index.uses_ann(conn, Slot(1, FACTS))
    assert _search(db, index, 1, vecs[17], 1)[0].rowid == 17


def test_repeated_query_matches_a_fresh_index_after_every_change(db: SqliteEngine) -> None:
    """Reusing a query's cosines never returns what a fresh index would not, through appends, deletes and replaces."""
    rng = np.random.default_rng(9)
    vecs = unit_vectors(rng, 30)
    _put(db, 1, list(range(20)), vecs[:20])
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    q = vecs[25]

    def same_as_fresh() -> None:
        fresh = _search(db, _vectors.VectorIndex(model_id=MODEL, dim=DIM), 1, q, 8)
        hits = _search(db, index, 1, q, 8)
        assert [h.rowid for h in hits] == [h.rowid for h in fresh]
        assert [h.cosine for h in hits] == pytest.approx([h.cosine for h in fresh], abs=1e-6)

    same_as_fresh()
    _put(db, 1, [20, 21], vecs[20:22])  # appends
    same_as_fresh()
    for _ in range(2):  # deletes of the current best
        with db.write() as conn:
            conn.delete_vectors(FACTS, [_search(db, index, 1, q, 1)[0].rowid])
        same_as_fresh()
    _put(db, 1, [5], vecs[25:26])  # row 5 now holds the query itself
    same_as_fresh()
    assert _search(db, index, 1, q, 1)[0].rowid == 5
