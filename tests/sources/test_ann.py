"""Tests of the HNSW graphs of large namespaces kept beside the database (`sources._ann`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from sources import _ann, _vectors
from sources._db import Database
from sources._vectors import Slot

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytest.importorskip("usearch")

DIM = 16
MODEL = "test-model"
FACTS = 1  # a corpus without the entries join, so rows need no entry
LIMIT = 20  # exact up to this many vectors, a graph above


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.open(tmp_path / "v.db")
    yield database
    database.close()


def _index(graphs: Path | None) -> _vectors.VectorIndex:
    return _vectors.VectorIndex(model_id=MODEL, dim=DIM, exact_limit=LIMIT, graphs=graphs)


def _put(db: Database, ns_id: int, rowids: list[int], vecs: np.ndarray) -> None:
    with db.write() as conn:
        _vectors.store_vectors(conn, Slot(ns_id, FACTS), rowids, vecs, MODEL)


def _delete(db: Database, rowids: list[int]) -> None:
    with db.write() as conn:
        _vectors.delete_vectors(conn, FACTS, rowids)


def _top(db: Database, index: _vectors.VectorIndex, ns_id: int, q: np.ndarray, k: int = 5) -> list[int]:
    with db.read() as conn:
        return [h.rowid for h in index.search(conn, Slot(ns_id, FACTS), q, k)]


def _exact(db: Database, ns_id: int, q: np.ndarray, k: int = 5) -> list[int]:
    return _top(db, _vectors.VectorIndex(model_id=MODEL, dim=DIM, exact_limit=10**9), ns_id, q, k)


def _no_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count graph builds from now on."""
    built: list[int] = []
    real = _ann.new_graph

    def counting(dim: int) -> Any:
        built.append(dim)
        return real(dim)

    monkeypatch.setattr(_ann, "new_graph", counting)
    return built


def test_a_built_graph_is_kept_and_restored_by_the_next_handle(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph built once is saved beside the database; another handle restores it, building nothing."""
    vecs = _unit(np.random.default_rng(1), 60)
    _put(db, 1, list(range(60)), vecs)
    graphs = tmp_path / "v.db.ann"
    assert _top(db, _index(graphs), 1, vecs[3]) == _exact(db, 1, vecs[3])
    assert list(graphs.glob("*.usearch"))
    built = _no_builds(monkeypatch)
    again = _index(graphs)
    assert _top(db, again, 1, vecs[7]) == _exact(db, 1, vecs[7])
    assert built == []


def test_a_restored_graph_catches_up_with_writes_made_since_it_was_saved(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Vectors added, replaced and deleted by others after the save are searched as they are now."""
    rng = np.random.default_rng(2)
    vecs = _unit(rng, 60)
    _put(db, 1, list(range(60)), vecs)
    graphs = tmp_path / "v.db.ann"
    _top(db, _index(graphs), 1, vecs[0])  # builds and saves
    new = _unit(rng, 10)
    _put(db, 1, list(range(60, 70)), new)  # added
    _put(db, 1, [5], new[:1] * -1.0)  # replaced: the old vector of row 5 is gone
    _delete(db, [7, 8])
    built = _no_builds(monkeypatch)
    index = _index(graphs)
    for q in (new[3], vecs[5], vecs[7], vecs[20]):
        assert _top(db, index, 1, q) == _exact(db, 1, q)
    assert 7 not in _top(db, index, 1, vecs[7], 70)
    assert built == []


def test_a_graph_of_other_vectors_is_rebuilt_never_used(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph file that holds other vectors under the same ids (another database) is rebuilt."""
    rng = np.random.default_rng(3)
    other = Database.open(tmp_path / "other.db")
    try:
        _put(other, 1, list(range(60)), _unit(rng, 60))
        _top(other, _index(tmp_path / "v.db.ann"), 1, _unit(rng, 1)[0])  # its graph, in v.db's place
    finally:
        other.close()
    vecs = _unit(rng, 60)
    _put(db, 1, list(range(60)), vecs)
    built = _no_builds(monkeypatch)
    assert _top(db, _index(tmp_path / "v.db.ann"), 1, vecs[9]) == _exact(db, 1, vecs[9])
    assert built == [DIM]


def test_an_unreadable_graph_file_is_rebuilt(db: Database, tmp_path: Path) -> None:
    """A damaged graph file costs a rebuild, never an error or a wrong answer."""
    vecs = _unit(np.random.default_rng(4), 60)
    _put(db, 1, list(range(60)), vecs)
    graphs = tmp_path / "v.db.ann"
    _top(db, _index(graphs), 1, vecs[0])
    for path in graphs.glob("*.usearch"):
        path.write_bytes(b"not a graph" * 100)
    assert _top(db, _index(graphs), 1, vecs[11]) == _exact(db, 1, vecs[11])


def test_a_graph_that_cannot_be_saved_still_answers(db: Database, tmp_path: Path) -> None:
    """Where the graph cannot be written (a file in the directory's place) search still answers."""
    vecs = _unit(np.random.default_rng(5), 60)
    _put(db, 1, list(range(60)), vecs)
    blocked = tmp_path / "v.db.ann"
    blocked.write_text("a file, not a directory")
    index = _index(blocked)
    assert _top(db, index, 1, vecs[2]) == _exact(db, 1, vecs[2])
    index.persist()
    assert blocked.read_text() == "a file, not a directory"


def test_graphs_are_kept_per_namespace_and_never_cross(db: Database, tmp_path: Path) -> None:
    """Each namespace has its own graph; a search of one returns only its rows, restored or not."""
    rng = np.random.default_rng(6)
    a, b = _unit(rng, 60), _unit(rng, 60)
    _put(db, 1, list(range(60)), a)
    _put(db, 2, list(range(100, 160)), b)
    graphs = tmp_path / "v.db.ann"
    for index in (_index(graphs), _index(graphs)):  # built, then restored
        assert set(_top(db, index, 1, b[4], 30)) <= set(range(60))
        assert set(_top(db, index, 2, a[4], 30)) <= set(range(100, 160))
    assert len(list(graphs.glob("*.usearch"))) == 2


def test_changes_are_saved_when_the_index_persists(db: Database, tmp_path: Path) -> None:
    """Writes applied to a live graph are saved by `persist`, so the next handle has nothing to add."""
    rng = np.random.default_rng(7)
    vecs = _unit(rng, 60)
    _put(db, 1, list(range(60)), vecs)
    graphs = tmp_path / "v.db.ann"
    index = _index(graphs)
    _top(db, index, 1, vecs[0])
    _put(db, 1, list(range(60, 65)), _unit(rng, 5))
    _top(db, index, 1, vecs[0])  # catches up in memory
    (path,) = graphs.glob("*.usearch")
    before = path.stat().st_mtime_ns
    index.persist()
    assert path.stat().st_mtime_ns > before
