"""Tests of the per-namespace vector index (exact and HNSW search, cache sync), on both engines
(`engine`, tests/sources/conftest.py): the vectors, their ids and tombstones are the engine's."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np
import pytest
from store_kit import engine_rows
from vector_kit import DIM, FACTS, MODEL, new_namespaces, unit_vectors

from sources.storage import _vectors
from sources.storage._vectors import Slot

if TYPE_CHECKING:
    from store_kit import StoreOpener

    from sources.storage._engine import Engine


def _put(engine: Engine, ns_id: int, rowids: list[int], vecs: np.ndarray, model: str = MODEL) -> None:
    with engine.write() as conn:
        conn.store_vectors(Slot(ns_id, FACTS), rowids, vecs, model)


def _search(
    engine: Engine, index: _vectors.VectorIndex, ns_id: int, q: np.ndarray, k: int
) -> list[_vectors.Hit]:
    with engine.read() as conn:
        return index.search(conn, Slot(ns_id, FACTS), q, k)


def test_exact_search_returns_true_top_k(engine: Engine) -> None:
    """Exact search returns the k largest cosines, best first."""
    (ns,) = new_namespaces(engine)
    rng = np.random.default_rng(1)
    vecs = unit_vectors(rng, 40)
    _put(engine, ns, list(range(100, 140)), vecs)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    q = vecs[7]
    hits = _search(engine, index, ns, q, 5)
    expected = np.argsort(-(vecs @ q))[:5]
    assert [h.rowid for h in hits] == [100 + int(i) for i in expected]
    assert hits[0].cosine == pytest.approx(1.0, abs=1e-5)


def test_path_selection_by_size(engine: Engine) -> None:
    """Up to the limit search is exact; past it, once warmed, an HNSW index answers the same best row."""
    pytest.importorskip("usearch")
    (ns,) = new_namespaces(engine)
    slot = Slot(ns, FACTS)
    rng = np.random.default_rng(2)
    vecs = unit_vectors(rng, 60)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM, exact_limit=50)
    _put(engine, ns, list(range(40)), vecs[:40])
    with engine.read() as conn:
        assert not index.uses_ann(conn, slot)
    _put(engine, ns, list(range(40, 60)), vecs[40:])
    with engine.read() as conn:
        assert not index.uses_ann(conn, slot)  # crossed by writes: exact, no build in a search
        assert _search(engine, index, ns, vecs[45], 1)[0].rowid == 45
        index.warm(conn, slot)
        assert index.uses_ann(conn, slot)
    for i in (3, 45, 59):
        assert _search(engine, index, ns, vecs[i], 1)[0].rowid == i
    with engine.write() as conn:
        conn.delete_vectors(FACTS, [45])
    assert 45 not in {h.rowid for h in _search(engine, index, ns, vecs[45], 10)}
    with engine.read() as conn:
        assert index.uses_ann(conn, slot)  # the delete cost no rebuild


def test_vectors_never_cross_namespaces(engine: Engine) -> None:
    """A namespace's search returns only its own rows, even for an exact copy of another's vector."""
    one, two = new_namespaces(engine, 2)
    rng = np.random.default_rng(3)
    a, b = unit_vectors(rng, 10), unit_vectors(rng, 10)
    _put(engine, one, list(range(10)), a)
    _put(engine, two, list(range(10, 20)), b)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    hits = _search(engine, index, two, a[0], 20)
    assert {h.rowid for h in hits} == set(range(10, 20))


def test_appends_by_anyone_are_seen(engine: Engine, make_store: StoreOpener) -> None:
    """Rows written after the matrix loaded, even by another connection, are found by the next search."""
    (ns,) = new_namespaces(engine)
    rng = np.random.default_rng(4)
    vecs = unit_vectors(rng, 12)
    _put(engine, ns, list(range(10)), vecs[:10])
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    assert _search(engine, index, ns, vecs[10], 1)[0].rowid != 10
    _put(make_store.open_engine(), ns, [10, 11], vecs[10:])  # another process's engine
    assert _search(engine, index, ns, vecs[10], 1)[0].rowid == 10
    assert _search(engine, index, ns, vecs[11], 1)[0].rowid == 11


def test_deletes_are_never_returned(engine: Engine, make_store: StoreOpener) -> None:
    """A deleted vector disappears from a loaded index, whichever connection deleted it, even by plain SQL."""
    (ns,) = new_namespaces(engine)
    rng = np.random.default_rng(5)
    vecs = unit_vectors(rng, 10)
    _put(engine, ns, list(range(10)), vecs)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    assert _search(engine, index, ns, vecs[3], 1)[0].rowid == 3
    with engine.write() as conn:
        conn.delete_vectors(FACTS, [3])
    assert 3 not in {h.rowid for h in _search(engine, index, ns, vecs[3], 10)}
    other = make_store.open_engine()  # another process, deleting past the engine's methods
    engine_rows(other, "DELETE FROM vectors WHERE corpus = ? AND src_rowid = ?", (FACTS, 4), write=True)
    assert 4 not in {h.rowid for h in _search(engine, index, ns, vecs[4], 10)}
    assert len(_search(engine, index, ns, vecs[0], 10)) == 8


def test_reused_rowids_cannot_hide_a_delete(engine: Engine, make_store: StoreOpener) -> None:
    """Deleting the newest vector and writing one in its place (the leak recipe) is seen: ids are never reused."""
    (ns,) = new_namespaces(engine)
    rng = np.random.default_rng(11)
    vecs = unit_vectors(rng, 6)
    _put(engine, ns, list(range(5)), vecs[:5])
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    assert _search(engine, index, ns, vecs[4], 1)[0].rowid == 4
    with make_store.open_engine().write() as other:  # another process, in one transaction
        other.delete_vectors(FACTS, [4])
        other.store_vectors(Slot(ns, FACTS), [7], vecs[5:6], MODEL)
    hits = _search(engine, index, ns, vecs[4], 6)
    assert 4 not in {h.rowid for h in hits}
    assert {h.rowid for h in hits} == {0, 1, 2, 3, 7}
    fresh = _search(engine, _vectors.VectorIndex(model_id=MODEL, dim=DIM), ns, vecs[4], 6)
    assert [h.rowid for h in hits] == [h.rowid for h in fresh]


def test_an_index_behind_the_kept_tombstones_reloads(engine: Engine) -> None:
    """When the tombstones it needs were pruned, the index reloads instead of missing deletes."""
    one, two = new_namespaces(engine, 2)
    rng = np.random.default_rng(12)
    vecs = unit_vectors(rng, 8)
    _put(engine, one, list(range(8)), vecs)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    assert _search(engine, index, one, vecs[2], 1)[0].rowid == 2
    with engine.write() as conn:
        conn.delete_vectors(FACTS, [2, 3])
        conn.store_vectors(Slot(two, FACTS), [50], vecs[:1], MODEL)  # another namespace's delete
        conn.delete_vectors(FACTS, [50])
    (newest,) = engine_rows(engine, "SELECT max(id) FROM vector_tombstones")[0]
    # As the prune trigger would: only the other namespace's tombstone is kept.
    engine_rows(engine, "DELETE FROM vector_tombstones WHERE id < ?", (newest,), write=True)
    assert {h.rowid for h in _search(engine, index, one, vecs[2], 8)} == {0, 1, 4, 5, 6, 7}


def test_replaced_vector_is_the_new_one(engine: Engine) -> None:
    """Overwriting a row's vector (as reindex does) replaces it in the cache."""
    (ns,) = new_namespaces(engine)
    rng = np.random.default_rng(6)
    vecs = unit_vectors(rng, 6)
    _put(engine, ns, list(range(5)), vecs[:5])
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    _search(engine, index, ns, vecs[0], 1)
    _put(engine, ns, [2], vecs[5:6])
    hits = _search(engine, index, ns, vecs[5], 5)
    assert hits[0].rowid == 2
    assert hits[0].cosine == pytest.approx(1.0, abs=1e-5)
    assert len(hits) == 5


def test_cosines_from_memory_are_those_of_the_stored_vectors(engine: Engine) -> None:
    """`cosines` of some rows equal the query's dot products with `stored_vectors` of them, after a
    replace and a delete; a deleted row, a row of another model and an unknown row are absent."""
    (ns,) = new_namespaces(engine)
    slot = Slot(ns, FACTS)
    rng = np.random.default_rng(12)
    vecs = unit_vectors(rng, 12)
    _put(engine, ns, list(range(10)), vecs[:10])
    _put(engine, ns, [10], vecs[10:11], model="another-model")
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    q = vecs[11]
    _search(engine, index, ns, q, 1)  # the matrix is in memory
    _put(engine, ns, [3], vecs[11:12])  # replaced after the load
    with engine.write() as conn:
        conn.delete_vectors(FACTS, [4])
    asked = [0, 3, 4, 7, 10, 99]
    with engine.read() as conn:
        got = index.cosines(conn, slot, asked, q)
        stored = conn.stored_vectors(slot, asked, MODEL, DIM)
    assert set(got) == set(stored) == {0, 3, 7}
    for rowid, vector in stored.items():
        assert got[rowid] == pytest.approx(float(vector @ q), abs=1e-6)
    assert got[3] == pytest.approx(1.0, abs=1e-5)


def test_other_model_rows_are_stale_and_ignored(engine: Engine) -> None:
    """Vectors of another model are counted as stale and never searched."""
    (ns,) = new_namespaces(engine)
    rng = np.random.default_rng(7)
    vecs = unit_vectors(rng, 6)
    _put(engine, ns, list(range(4)), vecs[:4])
    _put(engine, ns, [4, 5], vecs[4:], model="old-model")
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    with engine.read() as conn:
        assert index.stale(conn, Slot(ns, FACTS)) == 2
    assert {h.rowid for h in _search(engine, index, ns, vecs[4], 10)} == {0, 1, 2, 3}


def test_blob_round_trip() -> None:
    """A vector survives storage as float32 bytes exactly."""
    v = np.arange(DIM, dtype=np.float32) / 7
    np.testing.assert_array_equal(_vectors.from_blobs([_vectors.to_blob(v)], DIM)[0], v)


def test_store_vectors_rejects_mismatched_lengths(engine: Engine) -> None:
    """Rowids and vectors must pair up; nothing is written otherwise."""
    (ns,) = new_namespaces(engine)
    with pytest.raises(ValueError, match="rowids"), engine.write() as conn:
        conn.store_vectors(Slot(ns, FACTS), [1, 2], unit_vectors(np.random.default_rng(8), 1), MODEL)
    assert engine_rows(engine, "SELECT count(*) FROM vectors") == [(0,)]


def test_without_usearch_large_namespaces_stay_exact(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the limit with usearch absent, search stays exact and correct instead of failing."""
    monkeypatch.setitem(sys.modules, "usearch.index", None)  # makes the import raise ImportError
    (ns,) = new_namespaces(engine)
    rng = np.random.default_rng(9)
    vecs = unit_vectors(rng, 30)
    _put(engine, ns, list(range(30)), vecs)
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM, exact_limit=10)
    with engine.read() as conn:
        index.warm(conn, Slot(ns, FACTS))
        assert not index.uses_ann(conn, Slot(ns, FACTS))
    assert _search(engine, index, ns, vecs[17], 1)[0].rowid == 17


def test_repeated_query_matches_a_fresh_index_after_every_change(engine: Engine) -> None:
    """Reusing a query's cosines never returns what a fresh index would not, through appends, deletes and replaces."""
    (ns,) = new_namespaces(engine)
    rng = np.random.default_rng(9)
    vecs = unit_vectors(rng, 30)
    _put(engine, ns, list(range(20)), vecs[:20])
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM)
    q = vecs[25]

    def same_as_fresh() -> None:
        fresh = _search(engine, _vectors.VectorIndex(model_id=MODEL, dim=DIM), ns, q, 8)
        hits = _search(engine, index, ns, q, 8)
        assert [h.rowid for h in hits] == [h.rowid for h in fresh]
        assert [h.cosine for h in hits] == pytest.approx([h.cosine for h in fresh], abs=1e-6)

    same_as_fresh()
    _put(engine, ns, [20, 21], vecs[20:22])  # appends
    same_as_fresh()
    for _ in range(2):  # deletes of the current best
        with engine.write() as conn:
            conn.delete_vectors(FACTS, [_search(engine, index, ns, q, 1)[0].rowid])
        same_as_fresh()
    _put(engine, ns, [5], vecs[25:26])  # row 5 now holds the query itself
    same_as_fresh()
    assert _search(engine, index, ns, q, 1)[0].rowid == 5
