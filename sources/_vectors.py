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
namespace. A query first asks its connection's `PRAGMA data_version` (microseconds): if no
commit happened since this connection last checked the matrix, it is current. Otherwise it
reads a fingerprint of the namespace's rows (count and largest hidden rowid: a covering scan
of the `vectors_ns` index, about 2 ms per 20k rows): appended rows are then loaded
incrementally (the common case: ingest while serving), anything else reloads the matrix.
Deletes made through this process's store are applied to the cache directly (the row is
marked dead), so they cost no reload. One case the fingerprint cannot see: another
process deleting the newest row and inserting one that reuses its rowid; that is picked up
by the next other write.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

import attrs
import numpy as np
import numpy.typing as npt
import structlog

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable, Sequence

    from broker.abc import Embedder

logger = structlog.get_logger(__name__)

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
    conn.executemany(
        "INSERT OR REPLACE INTO vectors (corpus, src_rowid, ns_id, model_id, vec) VALUES (?, ?, ?, ?, ?)",
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


def delete_vectors(conn: sqlite3.Connection, corpus: int, rowids: Iterable[int]) -> list[tuple[int, int]]:
    """Delete the vectors of rows of one corpus; returns (ns_id, src_rowid) of those removed."""
    removed: list[tuple[int, int]] = []
    for rowid in rowids:
        removed += [
            (int(r[0]), int(r[1]))
            for r in conn.execute(
                "DELETE FROM vectors WHERE corpus = ? AND src_rowid = ? RETURNING ns_id, src_rowid",
                (corpus, int(rowid)),
            )
        ]
    return removed


def stored_vectors(
    conn: sqlite3.Connection, corpus: int, rowids: Sequence[int], model_id: str, dim: int
) -> dict[int, npt.NDArray[np.float32]]:
    """Return the current-model vectors of some rows (rows without one are absent)."""
    out: dict[int, npt.NDArray[np.float32]] = {}
    for start in range(0, len(rowids), 500):
        chunk = [int(r) for r in rowids[start : start + 500]]
        marks = ",".join("?" * len(chunk))
        for src, blob in conn.execute(
            "SELECT src_rowid, vec FROM vectors "
            f"WHERE corpus = ? AND model_id = ? AND src_rowid IN ({marks})",
            [corpus, model_id, *chunk],
        ):
            out[int(src)] = from_blobs([blob], dim)[0]
    return out


# -- the in-memory index ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Hit:
    """One dense search result: a source rowid and its cosine with the query."""

    rowid: int
    cosine: float


def _fingerprint(conn: sqlite3.Connection, ns_id: int, corpus: int) -> tuple[int, int]:
    row = conn.execute(
        "SELECT count(*), coalesce(max(rowid), 0) FROM vectors WHERE ns_id = ? AND corpus = ?",
        (ns_id, corpus),
    ).fetchone()
    return int(row[0]), int(row[1])


def _select_rows(
    conn: sqlite3.Connection, ns_id: int, corpus: int, after: int, upto: int
) -> list[tuple[int, int, str, bytes, str | None]]:
    """Select (hidden rowid, src_rowid, model_id, vec, memory_type) of rows in (after, upto].

    Bounded by the fingerprint just read, so a concurrent append is not counted twice.
    """
    if corpus == 0:  # entries carry a memory type for the typed filter
        sql = (
            "SELECT v.rowid, v.src_rowid, v.model_id, v.vec, e.memory_type FROM vectors v "
            "LEFT JOIN entries e ON e.rowid = v.src_rowid "
            "WHERE v.ns_id = ? AND v.corpus = ? AND v.rowid > ? AND v.rowid <= ? ORDER BY v.rowid"
        )
    else:
        sql = (
            "SELECT rowid, src_rowid, model_id, vec, NULL FROM vectors "
            "WHERE ns_id = ? AND corpus = ? AND rowid > ? AND rowid <= ? ORDER BY rowid"
        )
    return [
        (int(r[0]), int(r[1]), str(r[2]), bytes(r[3]), r[4])
        for r in conn.execute(sql, (ns_id, corpus, after, upto))
    ]


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

    An append-only buffer with a dead mask, so appends and deletes never rebuild it.
    """

    dim: int
    exact_limit: int
    fingerprint: tuple[int, int] = (0, 0)
    stale: int = 0  # rows of another model, ignored by search
    n: int = 0
    live: int = 0
    buf: Vectors = attrs.field(factory=lambda: np.empty((0, 0), dtype=np.float32))
    rowids: npt.NDArray[np.int64] = attrs.field(factory=lambda: np.empty(0, dtype=np.int64))
    alive: npt.NDArray[np.bool_] = attrs.field(factory=lambda: np.empty(0, dtype=np.bool_))
    tags: npt.NDArray[np.int16] = attrs.field(factory=lambda: np.empty(0, dtype=np.int16))
    codes: dict[str | None, int] = attrs.field(factory=lambda: {None: 0})
    position: dict[int, int] = attrs.field(factory=dict)
    ann: Any = None
    no_ann: bool = False  # usearch missing: stay exact, warn once
    generation: int = attrs.field(factory=lambda: next(_GENERATIONS))
    """Unique per matrix: with `n` it names the rows a cosine vector was computed over."""

    def append(self, rows: list[tuple[int, int, str, bytes, str | None]], model_id: str) -> None:
        """Add stored rows of the current model (others only counted as stale)."""
        mine = [r for r in rows if r[2] == model_id]
        self.stale += len(rows) - len(mine)
        if not mine:
            return
        self._reserve(self.n + len(mine))
        block = from_blobs([r[3] for r in mine], self.dim)
        start = self.n
        self.buf[start : start + len(mine)] = block
        for i, r in enumerate(mine):
            old = self.position.get(r[1])
            if old is not None:  # INSERT OR REPLACE of the same source row
                self._kill(old)
            self.position[r[1]] = start + i
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

    def forget(self, src_rowid: int) -> bool:
        """Mark a deleted source row dead; True if it was here."""
        pos = self.position.pop(src_rowid, None)
        if pos is None:
            return False
        self._kill(pos)
        return True

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
    # (ns_id, corpus, id(conn)) -> (conn, data_version) when that connection last found the
    # matrix current; the connection is held so its id cannot be reused by another one.
    _seen: dict[tuple[int, int, int], tuple[sqlite3.Connection, int]] = attrs.field(factory=dict)
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

    def uses_ann(self, conn: sqlite3.Connection, ns_id: int, corpus: int) -> bool:
        """Whether searches of this namespace and corpus go through the HNSW index."""
        with self._lock:
            return self._fresh(conn, ns_id, corpus).ann is not None

    def stale(self, conn: sqlite3.Connection, ns_id: int, corpus: int) -> int:
        """Count stored vectors of this namespace and corpus made by another model."""
        with self._lock:
            return self._fresh(conn, ns_id, corpus).stale

    def forget(self, removed: Iterable[tuple[int, int]], corpus: int) -> None:
        """Apply this process's committed deletes (ns_id, src_rowid) without a reload."""
        with self._lock:
            for ns_id, src in removed:
                matrix = self._cache.get((ns_id, corpus))
                if matrix is not None and matrix.forget(src):
                    count, top = matrix.fingerprint
                    matrix.fingerprint = (count - 1, top)

    def invalidate(self) -> None:
        """Drop every cached matrix (after a reindex)."""
        with self._lock:
            self._cache.clear()
            self._seen.clear()
            self._scores.clear()

    def _fresh(self, conn: sqlite3.Connection, ns_id: int, corpus: int) -> _Matrix:
        key = (ns_id, corpus)
        matrix = self._cache.get(key)
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        seen = self._seen.get((ns_id, corpus, id(conn)))
        if matrix is not None and seen is not None and seen[0] is conn and seen[1] == version:
            return matrix
        matrix = self._check(conn, ns_id, corpus)
        if len(self._seen) > 4096:
            self._seen.clear()
        self._seen[(ns_id, corpus, id(conn))] = (conn, version)  # only once the check succeeded
        return matrix

    def _check(self, conn: sqlite3.Connection, ns_id: int, corpus: int) -> _Matrix:
        key = (ns_id, corpus)
        count, top = _fingerprint(conn, ns_id, corpus)
        matrix = self._cache.get(key)
        if matrix is not None and matrix.fingerprint == (count, top):
            return matrix
        if matrix is not None and top > matrix.fingerprint[1]:
            rows = _select_rows(conn, ns_id, corpus, matrix.fingerprint[1], top)
            if matrix.fingerprint[0] + len(rows) == count:  # appends only
                matrix.append(rows, self.model_id)
                matrix.fingerprint = (count, top)
                return matrix
        matrix = _Matrix(dim=self.dim, exact_limit=self.exact_limit)
        matrix.append(_select_rows(conn, ns_id, corpus, 0, top), self.model_id)
        matrix.fingerprint = (count, top)
        self._cache[key] = matrix
        logger.debug("store.vectors.loaded", ns_id=ns_id, corpus=corpus, live=matrix.live, stale=matrix.stale)
        if matrix.stale:
            logger.warning(
                "store.vectors.stale", ns_id=ns_id, corpus=corpus, stale=matrix.stale, hint="run reindex"
            )
        return matrix
