"""Dense vectors: float32 BLOBs in the `vectors` table, and an in-memory cosine index.

Vectors never cross namespaces: every in-memory matrix holds one (namespace, corpus).

Search is exact (one numpy matrix product, memory-bound: about 0.13 us a vector of 384 on
this kind of machine) up to `EXACT_LIMIT` vectors, and through an HNSW graph (`usearch`, an
optional dependency imported only above the limit) beyond it, whose hits are re-scored
exactly; see benchmarks/ann_recall.py for its recall against exact search. A typed search of
such a matrix stays exact over the typed rows while they are few. The graph is built (or
restored from beside the database and brought up to date, `sources._ann`) when the matrix is
warmed above the limit (`MemoryStore.warm`, which the sources call when they open), never
inside a search: a matrix first loaded by a search (a namespace not warmed, after `reindex`,
or reloaded behind the tombstones kept), or that crosses the limit by writes, is searched
exactly until the store is warmed again.

Keeping the cache in sync. Each matrix is loaded lazily on the first dense query of its
namespace and then kept current by the write generation of its rows, which no rowid reuse
can hide: vector ids are AUTOINCREMENT (never given to another row) and every deleted vector
leaves a tombstone (schema v4, written by a trigger, so every process's deletes are seen).
Before each search the matrix catches up: vectors with an id above the largest it holds were
added, tombstones above the last it applied were removed (two index seeks when nothing
changed). A matrix that fell behind the tombstones kept (`_schema.TOMBSTONES_KEPT`) reloads.
Rows are only ever matched back to their memories within the same namespace.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

import attrs
import numpy as np
import numpy.typing as npt

from broker.log import get_logger

from . import _ann
from ._matrix import Hit, Matrix, Row, Vectors, from_blobs

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    from broker.abc import Embedder

logger = get_logger(__name__)

EXACT_LIMIT: Final = 25_000
"""Live vectors per (namespace, corpus) searched exactly; an HNSW graph is used above it.

Measured on 2 cores at 71k x 384: exact 9.2 ms a query, the graph 2.1 ms (recall@50 0.995
against exact); exact costs about 3 ms at this limit."""
_SCORES_KEPT: Final = 8  # cosine vectors kept for reuse (400 KB each at 100k rows)


def to_blob(vector: npt.NDArray[Any]) -> bytes:
    """Return a vector as the little-endian float32 bytes stored in `vectors.vec`."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


# -- writes (inside the caller's transaction) -----------------------------------------------


@attrs.frozen
class Slot:
    """Where vectors live: one corpus of one namespace. Every vector read names both."""

    ns_id: int
    corpus: int


def store_vectors(
    conn: sqlite3.Connection, slot: Slot, rowids: Sequence[int], vectors: Vectors, model_id: str
) -> None:
    """Write (or overwrite) the vectors of rows of one corpus, in the caller's transaction."""
    if len(rowids) != len(vectors):
        msg = f"{len(rowids)} rowids but {len(vectors)} vectors"
        raise ValueError(msg)
    # Delete, then insert: a replaced vector leaves a tombstone and gets a new id (an
    # INSERT OR REPLACE would fire no delete trigger).
    delete_vectors(conn, slot.corpus, rowids)
    conn.executemany(
        "INSERT INTO vectors (corpus, src_rowid, ns_id, model_id, vec) VALUES (?, ?, ?, ?, ?)",
        [
            (slot.corpus, int(r), slot.ns_id, model_id, to_blob(v))
            for r, v in zip(rowids, vectors, strict=True)
        ],
    )


def embed_and_store_vectors(
    conn: sqlite3.Connection, slot: Slot, rowids: Sequence[int], texts: Sequence[str], *, embedder: Embedder
) -> None:
    """Embed texts and store their vectors in the caller's transaction.

    For sources that write inside their own transaction (facts, knowledge). Embedding holds
    the write lock meanwhile (about 1.3 ms a text); embed first and call `store_vectors`
    to avoid that.
    """
    store_vectors(conn, slot, rowids, embedder.embed(list(texts)), embedder.model_id)


def delete_vectors(conn: sqlite3.Connection, corpus: int, rowids: Iterable[int]) -> None:
    """Delete the vectors of rows of one corpus (each leaves a tombstone for the indexes)."""
    conn.executemany(
        "DELETE FROM vectors WHERE corpus = ? AND src_rowid = ?", [(corpus, int(r)) for r in rowids]
    )


def stored_vectors(
    conn: sqlite3.Connection, slot: Slot, rowids: Sequence[int], model_id: str, dim: int
) -> dict[int, npt.NDArray[np.float32]]:
    """Return the current-model vectors of some rows of a namespace (rows without one are absent)."""
    out: dict[int, npt.NDArray[np.float32]] = {}
    for start in range(0, len(rowids), 500):
        chunk = [int(r) for r in rowids[start : start + 500]]
        marks = ",".join("?" * len(chunk))
        # `+ns_id`: without statistics SQLite prefers the (ns_id, corpus) index and reads every
        # vector of the namespace's corpus (37 ms at 71k rows) instead of seeking the rows by
        # the unique (corpus, src_rowid) index; the unary plus keeps ns_id out of the choice.
        for src, blob in conn.execute(
            "SELECT src_rowid, vec FROM vectors "
            f"WHERE +ns_id = ? AND corpus = ? AND model_id = ? AND src_rowid IN ({marks})",
            [slot.ns_id, slot.corpus, model_id, *chunk],
        ):
            out[int(src)] = from_blobs([blob], dim)[0]
    return out


# -- the in-memory index ----------------------------------------------------------------------


def _rows_after(conn: sqlite3.Connection, ns_id: int, corpus: int, after: int) -> list[Row]:
    """The namespace's vectors of one corpus with an id above `after`, in id order.

    Entries carry their memory type for the typed filter, joined within the namespace.
    """
    if corpus == 0:
        sql = (
            "SELECT v.id, v.src_rowid, v.model_id, v.vec, e.memory_type FROM vectors v "
            "LEFT JOIN entries e ON e.rowid = v.src_rowid AND e.ns_id = v.ns_id "
            "WHERE v.ns_id = ? AND v.corpus = ? AND v.id > ? ORDER BY v.id"
        )
    else:
        sql = (
            "SELECT id, src_rowid, model_id, vec, NULL FROM vectors "
            "WHERE ns_id = ? AND corpus = ? AND id > ? ORDER BY id"
        )
    return [
        (int(r[0]), int(r[1]), str(r[2]), bytes(r[3]), r[4])
        for r in conn.execute(sql, (ns_id, corpus, after))
    ]


def _tombstones_after(conn: sqlite3.Connection, ns_id: int, corpus: int, after: int) -> list[tuple[int, int]]:
    """(tombstone id, deleted vector id) of the namespace's corpus, above `after`."""
    return [
        (int(r[0]), int(r[1]))
        for r in conn.execute(
            "SELECT id, vector_id FROM vector_tombstones "
            "WHERE ns_id = ? AND corpus = ? AND id > ? ORDER BY id",
            (ns_id, corpus, after),
        )
    ]


def _last_tombstone(conn: sqlite3.Connection) -> tuple[int, int]:
    """(oldest kept, newest) tombstone id; (0, 0) when none is kept."""
    row = conn.execute("SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM vector_tombstones").fetchone()
    return int(row[0]), int(row[1])


@attrs.define(eq=False)
class VectorIndex:
    """Per-(namespace, corpus) cosine search over one model's stored vectors; thread-safe.

    One per store. Rows of another model are stale: search ignores them (and `stale()`
    counts them) until `reindex` re-embeds them.
    """

    model_id: str
    dim: int
    exact_limit: int = EXACT_LIMIT
    graphs: Path | None = None
    """The directory HNSW graphs are kept in between processes (None: built in memory only)."""
    _cache: dict[tuple[int, int], Matrix] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    # (ns_id, corpus, matrix generation, rows, query bytes) -> every row's cosine: the sources of a
    # turn (and the reference) search one matrix with one query, typed or not.
    _scores: OrderedDict[tuple[int, int, int, int, bytes], Vectors] = attrs.field(factory=OrderedDict)

    def search(
        self,
        conn: sqlite3.Connection,
        slot: Slot,
        query: Vectors,
        k: int,
        *,
        types: Iterable[str] | None = None,
    ) -> list[Hit]:
        """Return the k rows of one namespace and corpus closest to a unit query vector."""
        typed = None if types is None else frozenset(types)
        q = np.asarray(query, dtype=np.float32)
        with self._lock:
            matrix = self._fresh(conn, slot.ns_id, slot.corpus)
            if matrix.ann is not None or matrix.live == 0 or k <= 0:
                return matrix.search(q, k, typed)
            snapshot = matrix.exact(typed)
            key = (slot.ns_id, slot.corpus, matrix.generation, matrix.n, q.tobytes())
            scores = self._scores.get(key)
        if scores is None:
            scores = snapshot.buf @ q  # outside the lock: numpy releases the GIL
            with self._lock:
                self._scores[key] = scores
                while len(self._scores) > _SCORES_KEPT:
                    self._scores.popitem(last=False)
        return snapshot.search(q, k, scores)

    def background(self, conn: sqlite3.Connection, slot: Slot, query: Vectors) -> tuple[int, float]:
        """(live rows, mean cosine of the query over them): how close the namespace is to the
        query in general, the background its best match stands out from.

        One dot product with the sum of the live vectors, which each matrix keeps.
        """
        q = np.asarray(query, dtype=np.float32)
        with self._lock:
            matrix = self._fresh(conn, slot.ns_id, slot.corpus)
            return matrix.live, matrix.mean_cosine(q)

    def warm(self, conn: sqlite3.Connection, slot: Slot) -> int:
        """Load (or catch up) the matrix of one namespace and corpus now; return its live rows.

        A cold load reads every vector of the namespace (about 1 s at 100k) and opens the HNSW
        graph of a matrix above the exact limit (restored from beside the database, or built):
        it belongs before the first turn, never inside its deadline.
        """
        with self._lock:
            matrix = self._fresh(conn, slot.ns_id, slot.corpus)
            matrix.ensure_graph()
            return matrix.live

    def uses_ann(self, conn: sqlite3.Connection, slot: Slot) -> bool:
        """Whether searches of this namespace and corpus go through the HNSW index."""
        with self._lock:
            return self._fresh(conn, slot.ns_id, slot.corpus).ann is not None

    def stale(self, conn: sqlite3.Connection, slot: Slot) -> int:
        """Count stored vectors of this namespace and corpus made by another model."""
        with self._lock:
            return self._fresh(conn, slot.ns_id, slot.corpus).stale

    def persist(self) -> None:
        """Save every HNSW graph that changed since it was saved (the store calls it on close)."""
        with self._lock:
            for matrix in self._cache.values():
                matrix.persist()

    def invalidate(self) -> None:
        """Drop every cached matrix (after a reindex)."""
        with self._lock:
            self._cache.clear()
            self._scores.clear()

    def _fresh(self, conn: sqlite3.Connection, ns_id: int, corpus: int) -> Matrix:
        """The matrix of (ns_id, corpus), caught up with every committed write of any process.

        The tombstone bounds are read before any row, so whatever the row reads see is at
        least as new: a change missed here is caught by the next search.
        """
        oldest, newest = _last_tombstone(conn)
        matrix = self._cache.get((ns_id, corpus))
        if matrix is None or oldest > matrix.tomb + 1:  # new, or behind the tombstones kept
            return self._load(conn, ns_id, corpus, newest)
        if newest > matrix.tomb:
            matrix.remove(v for _, v in _tombstones_after(conn, ns_id, corpus, matrix.tomb))
            matrix.tomb = newest
        rows = _rows_after(conn, ns_id, corpus, matrix.top)
        if rows:
            matrix.append(rows, self.model_id)
        return matrix

    def _load(self, conn: sqlite3.Connection, ns_id: int, corpus: int, tomb: int) -> Matrix:
        path = None if self.graphs is None else _ann.graph_path(self.graphs, ns_id, corpus, self.model_id)
        matrix = Matrix(dim=self.dim, exact_limit=self.exact_limit, tomb=tomb, graph_path=path)
        # No graph here: a load may happen inside a search (first use, after `invalidate`, or
        # behind the tombstones kept), and opening a graph takes minutes at 1M; `warm` opens it.
        matrix.append(_rows_after(conn, ns_id, corpus, 0), self.model_id)
        self._cache[(ns_id, corpus)] = matrix
        logger.debug("store.vectors.loaded", ns_id=ns_id, corpus=corpus, live=matrix.live, stale=matrix.stale)
        if matrix.stale:
            logger.warning(
                "store.vectors.stale", ns_id=ns_id, corpus=corpus, stale=matrix.stale, hint="run reindex"
            )
        return matrix


__all__ = [
    "EXACT_LIMIT",
    "Hit",
    "Slot",
    "VectorIndex",
    "Vectors",
    "delete_vectors",
    "embed_and_store_vectors",
    "from_blobs",
    "store_vectors",
    "stored_vectors",
    "to_blob",
]
