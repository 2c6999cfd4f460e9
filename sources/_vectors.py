"""Dense vectors: float32 BLOBs in the `vectors` table, and an in-memory cosine index.

Vectors never cross namespaces: every in-memory matrix holds one (namespace, corpus).

Search is exact (one numpy matrix product) up to `EXACT_LIMIT` vectors, where that is the
fastest option on this kind of machine (about 3-5 ms at 100k x 384), and an HNSW graph
(`usearch`, an optional dependency imported only above the limit) beyond it; see
benchmarks/ann_recall.py for its recall against exact search. The graph is built in memory
when a namespace first crosses the limit (or is first loaded above it), under the index
lock: minutes for a large namespace on 2 cores. Persisting it beside the database is left
for later.

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

import itertools
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

import attrs
import numpy as np
import numpy.typing as npt

from broker.log import get_logger

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable, Sequence

    from broker.abc import Embedder

logger = get_logger(__name__)

Vectors = npt.NDArray[np.float32]

EXACT_LIMIT: Final = 100_000
"""Live vectors per (namespace, corpus) searched exactly; an HNSW index is used above it."""
ANN_EXPANSION: Final = 512
"""usearch `expansion_search` (ef): candidates kept while walking the graph (connectivity 16).

Measured at 10k x 384: recall@10 0.61 at ef 128 and 0.95 at ef 512 on isotropic Gaussian
vectors (the hard case), 1.0 on clustered ones; see benchmarks/ann_recall.py.
"""
_GENERATIONS = itertools.count()
_SCORES_KEPT: Final = 8  # cosine vectors kept for reuse (400 KB each at 100k rows)
_BACKGROUND_SAMPLE: Final = 4096  # rows a large namespace's mean cosine is taken over
_TYPED_OVERFETCH: Final = 8  # ANN asks for k * this when a typed filter drops rows after search


def to_blob(vector: npt.NDArray[Any]) -> bytes:
    """Return a vector as the little-endian float32 bytes stored in `vectors.vec`."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_blobs(blobs: Sequence[bytes], dim: int) -> Vectors:
    """Stack stored BLOBs into an (n, dim) float32 matrix."""
    if not blobs:
        return np.empty((0, dim), dtype=np.float32)
    flat = np.frombuffer(b"".join(blobs), dtype="<f4").astype(np.float32, copy=False)
    return flat.reshape(len(blobs), dim)


# -- writes (inside the caller's transaction) -----------------------------------------------


def store_vectors(  # noqa: PLR0913, PLR0917 - positional: other sources call it so
    conn: sqlite3.Connection,
    ns_id: int,
    corpus: int,
    rowids: Sequence[int],
    vectors: Vectors,
    model_id: str,
) -> None:
    """Write (or overwrite) the vectors of rows of one corpus, in the caller's transaction."""
    if len(rowids) != len(vectors):
        msg = f"{len(rowids)} rowids but {len(vectors)} vectors"
        raise ValueError(msg)
    # Delete, then insert: a replaced vector leaves a tombstone and gets a new id (an
    # INSERT OR REPLACE would fire no delete trigger).
    delete_vectors(conn, corpus, rowids)
    conn.executemany(
        "INSERT INTO vectors (corpus, src_rowid, ns_id, model_id, vec) VALUES (?, ?, ?, ?, ?)",
        [(corpus, int(r), ns_id, model_id, to_blob(v)) for r, v in zip(rowids, vectors, strict=True)],
    )


def embed_and_store_vectors(  # noqa: PLR0913
    conn: sqlite3.Connection,
    ns_id: int,
    corpus: int,
    rowids: Sequence[int],
    texts: Sequence[str],
    *,
    embedder: Embedder,
) -> None:
    """Embed texts and store their vectors in the caller's transaction.

    For sources that write inside their own transaction (facts, knowledge). Embedding holds
    the write lock meanwhile (about 1.3 ms a text); embed first and call `store_vectors`
    to avoid that.
    """
    store_vectors(conn, ns_id, corpus, rowids, embedder.embed(list(texts)), embedder.model_id)


def delete_vectors(conn: sqlite3.Connection, corpus: int, rowids: Iterable[int]) -> None:
    """Delete the vectors of rows of one corpus (each leaves a tombstone for the indexes)."""
    conn.executemany(
        "DELETE FROM vectors WHERE corpus = ? AND src_rowid = ?", [(corpus, int(r)) for r in rowids]
    )


def stored_vectors(  # noqa: PLR0913, PLR0917 - positional, like store_vectors
    conn: sqlite3.Connection, ns_id: int, corpus: int, rowids: Sequence[int], model_id: str, dim: int
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
            [ns_id, corpus, model_id, *chunk],
        ):
            out[int(src)] = from_blobs([blob], dim)[0]
    return out


# -- the in-memory index ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Hit:
    """One dense search result: a source rowid and its cosine with the query."""

    rowid: int
    cosine: float


_Row = tuple[int, int, str, bytes, str | None]  # (vector id, src_rowid, model_id, vec, memory_type)


def _rows_after(conn: sqlite3.Connection, ns_id: int, corpus: int, after: int) -> list[_Row]:
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


def _new_ann(dim: int) -> Any:  # noqa: ANN401 - usearch is optional and untyped
    """Return an empty HNSW index, or None (search stays exact) when usearch is not installed."""
    try:
        from usearch.index import Index  # noqa: PLC0415 - optional, only above EXACT_LIMIT
    except ImportError:
        logger.warning("store.vectors.no_ann", hint="install usearch for HNSW search of large namespaces")
        return None
    return Index(ndim=dim, metric="ip", dtype="f32", expansion_search=ANN_EXPANSION)


@attrs.define(eq=False)
class _Matrix:
    """The live vectors of one (namespace, corpus) for one model.

    An append-only buffer with a dead mask, so appends and deletes never rebuild it. `top`
    is the largest vector id it has read and `tomb` the last tombstone id it applied: its
    write generation.
    """

    dim: int
    exact_limit: int
    top: int = 0
    tomb: int = 0
    stale_ids: set[int] = attrs.field(factory=set)  # rows of another model, ignored by search
    n: int = 0
    live: int = 0
    buf: Vectors = attrs.field(factory=lambda: np.empty((0, 0), dtype=np.float32))
    rowids: npt.NDArray[np.int64] = attrs.field(factory=lambda: np.empty(0, dtype=np.int64))
    alive: npt.NDArray[np.bool_] = attrs.field(factory=lambda: np.empty(0, dtype=np.bool_))
    tags: npt.NDArray[np.int16] = attrs.field(factory=lambda: np.empty(0, dtype=np.int16))
    codes: dict[str | None, int] = attrs.field(factory=lambda: {None: 0})
    position: dict[int, int] = attrs.field(factory=dict)  # src_rowid -> position
    by_id: dict[int, int] = attrs.field(factory=dict)  # vector id -> position
    ann: Any = None
    no_ann: bool = False  # usearch missing: stay exact, warn once
    generation: int = attrs.field(factory=lambda: next(_GENERATIONS))
    """Unique per matrix: with `n` it names the rows a cosine vector was computed over."""

    @property
    def stale(self) -> int:
        """Rows of another model."""
        return len(self.stale_ids)

    def append(self, rows: list[_Row], model_id: str) -> None:
        """Add stored rows of the current model (others only counted as stale)."""
        if rows:
            self.top = max(self.top, rows[-1][0])
        mine = [r for r in rows if r[2] == model_id]
        self.stale_ids.update(r[0] for r in rows if r[2] != model_id)
        if not mine:
            return
        self._reserve(self.n + len(mine))
        block = from_blobs([r[3] for r in mine], self.dim)
        start = self.n
        self.buf[start : start + len(mine)] = block
        for i, r in enumerate(mine):
            old = self.position.get(r[1])
            if old is not None:  # the source row's vector was replaced
                self._kill(old)
            self.position[r[1]] = start + i
            self.by_id[r[0]] = start + i
            self.rowids[start + i] = r[1]
            self.alive[start + i] = True
            self.tags[start + i] = self.codes.setdefault(r[4], len(self.codes))
        self.n += len(mine)
        self.live += len(mine)
        if self.ann is None and self.live > self.exact_limit and not self.no_ann:
            self.ann = _new_ann(self.dim)
            self.no_ann = self.ann is None
            if self.ann is not None:
                keys = np.flatnonzero(self.alive[: self.n])
                self.ann.add(keys, self.buf[keys])
        elif self.ann is not None:
            self.ann.add(np.arange(start, self.n, dtype=np.int64), block)

    def remove(self, vector_ids: Iterable[int]) -> None:
        """Mark deleted vectors dead (ids it never held are ignored)."""
        for vid in vector_ids:
            self.stale_ids.discard(vid)
            pos = self.by_id.pop(vid, None)
            if pos is None:
                continue
            src = int(self.rowids[pos])
            if self.position.get(src) == pos:
                del self.position[src]
            self._kill(pos)

    def _kill(self, pos: int) -> None:
        if self.alive[pos]:
            self.alive[pos] = False
            self.live -= 1
            if self.ann is not None:
                self.ann.remove(pos)

    def _reserve(self, size: int) -> None:
        if size <= len(self.rowids):
            return
        cap = max(size, 2 * len(self.rowids), 64)
        buf = np.empty((cap, self.dim), dtype=np.float32)
        if self.n:
            buf[: self.n] = self.buf[: self.n]
        rowids = np.zeros(cap, dtype=np.int64)
        rowids[: self.n] = self.rowids[: self.n]
        alive = np.zeros(cap, dtype=np.bool_)
        alive[: self.n] = self.alive[: self.n]
        tags = np.zeros(cap, dtype=np.int16)
        tags[: self.n] = self.tags[: self.n]
        self.buf, self.rowids, self.alive, self.tags = buf, rowids, alive, tags

    def _allowed(self, types: frozenset[str]) -> npt.NDArray[np.int16]:
        """Tag codes a typed query keeps: its types, and unclassified (code 0)."""
        return np.array(
            [0, *(c for t, c in self.codes.items() if t is not None and t in types)], dtype=np.int16
        )

    def exact(self, types: frozenset[str] | None) -> _Exact:
        """Snapshot what an exact search reads, so it can run outside the index lock.

        Appends only write rows past `n` (or into a new buffer); deletes after the snapshot
        may still be returned, and the caller's row lookup drops them.
        """
        allowed = None if types is None else self._allowed(types)
        return _Exact(
            buf=self.buf[: self.n],
            rowids=self.rowids[: self.n],
            alive=None if self.live == self.n else self.alive[: self.n].copy(),
            tags=None if allowed is None else self.tags[: self.n],
            allowed=allowed,
        )

    def search(self, query: Vectors, k: int, types: frozenset[str] | None) -> list[Hit]:
        """Top-k live rows by cosine (typed: memory_type in types, or unclassified)."""
        if self.live == 0 or k <= 0:
            return []
        if self.ann is not None:
            return self._search_ann(query, k, types)
        return self.exact(types).search(query, k)

    def _search_ann(self, query: Vectors, k: int, types: frozenset[str] | None) -> list[Hit]:
        want = min(self.live, k * _TYPED_OVERFETCH if types is not None else k)
        found = self.ann.search(query, want)
        allowed = None if types is None else set(self._allowed(types).tolist())
        hits = []
        for key in np.asarray(found.keys, dtype=np.int64):
            if allowed is not None and int(self.tags[key]) not in allowed:
                continue
            hits.append(Hit(rowid=int(self.rowids[key]), cosine=float(self.buf[key] @ query)))
        hits.sort(key=lambda h: -h.cosine)
        return hits[:k]


@attrs.frozen(kw_only=True)
class _Exact:
    """An exact search over a snapshot of one matrix: one matrix product and a partition."""

    buf: Vectors
    rowids: npt.NDArray[np.int64]
    alive: npt.NDArray[np.bool_] | None
    tags: npt.NDArray[np.int16] | None
    allowed: npt.NDArray[np.int16] | None

    def search(self, query: Vectors, k: int, scores: Vectors | None = None) -> list[Hit]:
        """Top-k rows by cosine among the live (and allowed) ones.

        `scores` are `buf @ query` when the caller already has them (never modified here).
        """
        n = len(self.rowids)
        if scores is None:
            scores = self.buf @ query
        elif self.alive is not None or self.tags is not None:
            scores = scores.copy()  # masked below; the caller's array stays intact
        if self.alive is None and self.tags is None:
            k = min(k, n)
        else:
            keep = np.ones(n, dtype=np.bool_) if self.alive is None else self.alive
            if self.tags is not None and self.allowed is not None:
                keep = keep & np.isin(self.tags, self.allowed)
            scores[~keep] = -np.inf
            k = min(k, int(keep.sum()))
            if k == 0:
                return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(rowid=int(self.rowids[i]), cosine=float(scores[i])) for i in top]


@attrs.define(eq=False)
class VectorIndex:
    """Per-(namespace, corpus) cosine search over one model's stored vectors; thread-safe.

    One per store. Rows of another model are stale: search ignores them (and `stale()`
    counts them) until `reindex` re-embeds them.
    """

    model_id: str
    dim: int
    exact_limit: int = EXACT_LIMIT
    _cache: dict[tuple[int, int], _Matrix] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    # (ns_id, corpus, matrix generation, rows, query bytes) -> every row's cosine: the sources of a
    # turn (and the reference) search one matrix with one query, typed or not.
    _scores: OrderedDict[tuple[int, int, int, int, bytes], Vectors] = attrs.field(factory=OrderedDict)

    def search(  # noqa: PLR0913
        self,
        conn: sqlite3.Connection,
        ns_id: int,
        corpus: int,
        query: Vectors,
        k: int,
        *,
        types: Iterable[str] | None = None,
    ) -> list[Hit]:
        """Return the k rows of one namespace and corpus closest to a unit query vector."""
        typed = None if types is None else frozenset(types)
        q = np.asarray(query, dtype=np.float32)
        with self._lock:
            matrix = self._fresh(conn, ns_id, corpus)
            if matrix.ann is not None or matrix.live == 0 or k <= 0:
                return matrix.search(q, k, typed)
            snapshot = matrix.exact(typed)
            key = (ns_id, corpus, matrix.generation, matrix.n, q.tobytes())
            scores = self._scores.get(key)
        if scores is None:
            scores = snapshot.buf @ q  # outside the lock: numpy releases the GIL
            with self._lock:
                self._scores[key] = scores
                while len(self._scores) > _SCORES_KEPT:
                    self._scores.popitem(last=False)
        return snapshot.search(q, k, scores)

    def background(
        self, conn: sqlite3.Connection, ns_id: int, corpus: int, query: Vectors
    ) -> tuple[int, float]:
        """(live rows, mean cosine of the query over them): how close the namespace is to the
        query in general, the background its best match stands out from.

        Exact matrices reuse the query's cosine vector; above the exact limit the mean is
        taken over an even sample of `_BACKGROUND_SAMPLE` live rows.
        """
        q = np.asarray(query, dtype=np.float32)
        with self._lock:
            matrix = self._fresh(conn, ns_id, corpus)
            if matrix.live == 0:
                return 0, 0.0
            count = matrix.live
            snapshot = matrix.exact(None)
            key = (ns_id, corpus, matrix.generation, matrix.n, q.tobytes())
            scores = self._scores.get(key)
        live = np.flatnonzero(snapshot.alive) if snapshot.alive is not None else None
        if scores is None and len(snapshot.rowids) > _BACKGROUND_SAMPLE:
            rows = live if live is not None else np.arange(len(snapshot.rowids))
            rows = rows[np.linspace(0, len(rows) - 1, _BACKGROUND_SAMPLE).astype(np.int64)]
            return count, float((snapshot.buf[rows] @ q).mean())
        if scores is None:
            scores = snapshot.buf @ q
        picked = scores if live is None else scores[live]
        return count, float(picked.mean())

    def warm(self, conn: sqlite3.Connection, ns_id: int, corpus: int) -> int:
        """Load (or catch up) the matrix of one namespace and corpus now; return its live rows.

        A cold load reads every vector of the namespace (about 1 s at 100k): it belongs before
        the first turn, never inside its deadline.
        """
        with self._lock:
            return self._fresh(conn, ns_id, corpus).live

    def uses_ann(self, conn: sqlite3.Connection, ns_id: int, corpus: int) -> bool:
        """Whether searches of this namespace and corpus go through the HNSW index."""
        with self._lock:
            return self._fresh(conn, ns_id, corpus).ann is not None

    def stale(self, conn: sqlite3.Connection, ns_id: int, corpus: int) -> int:
        """Count stored vectors of this namespace and corpus made by another model."""
        with self._lock:
            return self._fresh(conn, ns_id, corpus).stale

    def invalidate(self) -> None:
        """Drop every cached matrix (after a reindex)."""
        with self._lock:
            self._cache.clear()
            self._scores.clear()

    def _fresh(self, conn: sqlite3.Connection, ns_id: int, corpus: int) -> _Matrix:
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

    def _load(self, conn: sqlite3.Connection, ns_id: int, corpus: int, tomb: int) -> _Matrix:
        matrix = _Matrix(dim=self.dim, exact_limit=self.exact_limit, tomb=tomb)
        matrix.append(_rows_after(conn, ns_id, corpus, 0), self.model_id)
        self._cache[(ns_id, corpus)] = matrix
        logger.debug("store.vectors.loaded", ns_id=ns_id, corpus=corpus, live=matrix.live, stale=matrix.stale)
        if matrix.stale:
            logger.warning(
                "store.vectors.stale", ns_id=ns_id, corpus=corpus, stale=matrix.stale, hint="run reindex"
            )
        return matrix
