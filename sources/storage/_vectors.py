"""Dense vectors: stored by the engine (`Reader.vector_rows`), searched in memory here.

Vectors never cross namespaces: every in-memory matrix holds one (namespace, corpus).

Search is exact up to `EXACT_LIMIT` vectors: every row ranked by its 8-bit copy's product with
the query (one integer product, memory-bound, a quarter of float32's bytes: `_matrix.Exact`),
a shortlist of the best (`_quantised.shortlist`: twice k, at least k + 16) re-scored from the float32
rows. A namespace holding more than the limit between its corpora has one HNSW graph over all of
them (`usearch`, imported only then; `sources.storage._ann`), whose hits are re-scored exactly; see
benchmarks/ann_recall.py for its recall against exact search. The turn's retrieval of every
corpus at once (`VectorIndex.nearest`) is one walk of that graph; a search of one corpus goes
through it while the corpus itself holds more than the limit, and is exact below it. A typed
search of a corpus stays exact over the typed rows while they are few. The graph is built (or
restored from beside the database and brought up to date, `sources.storage._ann`) when the namespace is
warmed above the limit (`MemoryStore.warm`, which the sources call when they open), never inside
a search: a matrix first loaded by a search (a namespace not warmed, after `reindex`, or
reloaded behind the tombstones kept), or a namespace that crosses the limit by writes, is
searched exactly until the store is warmed again.

Keeping the cache in sync. Each matrix is loaded lazily on the first dense query of its
namespace and then kept current by the write generation of its rows, which no rowid reuse
can hide: vector ids are AUTOINCREMENT (never given to another row) and every deleted vector
leaves a tombstone (schema v4, written by a trigger, so every process's deletes are seen).
Before each search the matrix catches up: vectors with an id above the largest it holds were
added, tombstones above the last it applied were removed (two index seeks when nothing
changed). A matrix that fell behind the tombstones kept
(`sources.storage._sqlite._schema.TOMBSTONES_KEPT`) reloads.
Rows are only ever matched back to their memories within the same namespace.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Final

import attrs
import numpy as np

from broker.log import get_logger

from . import _ann
from ._engine import Slot
from ._matrix import Matrix, graph_nearest, open_namespace_graph
from ._quantised import Vectors, from_blobs, shortlist, to_blob
from ._runs import Hit

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

    from ._ann import NamespaceGraph
    from ._engine import Reader

logger = get_logger(__name__)

EXACT_LIMIT: Final = 20_000
"""Live vectors a namespace holds (over its corpora) before it has an HNSW graph. A search of one
corpus (`VectorIndex.search`) is exact while the corpus holds at most this many and goes through
its namespace's graph above it; the turn's retrieval of every corpus at once
(`VectorIndex.nearest`) walks the graph for all of them.

An exact search reads every vector (1.5 KB each at 384 dimensions) in one pass the processor
prefetches; a graph search at ef 512 jumps between a few thousand of them. Inside a turn the
graph is cold in the cache (the task's embedding has just streamed the model's weights through
it), so each jump waits on memory. Measured in hybrid turns at 100k (`benchmarks.turn_cost`, 2
cores; corpora of 77k, 15k and 6k vectors): a graph search took 1.05 ms at 6k and 1.38 ms at 15k
(1.7 ms at 77k), an exact search of both 1.9 ms (1.4 of it the product, at the memory's
bandwidth); the turn as a whole, alternated six times with a limit of 5,000, p50 17.4 against
17.6 ms and 16.5 against 16.7 ms of CPU (means; the exact pass streams its rows through the
cache the rest of the turn reads from; measured before the exact pass ranked by 8-bit copies,
which halved its cost; measured before a namespace had one graph over its corpora, when each
corpus above the limit had its own). Below the limit no graph is built or kept, and the cosines
returned are the float32 ones; only which rows are re-scored comes from the 8-bit ranking
(`_matrix.Exact`)."""
_SCORES_KEPT: Final = 8  # 8-bit product vectors kept for reuse (80 KB each at 20k rows)


# -- writes (inside the caller's transaction) -----------------------------------------------


# -- the in-memory index ----------------------------------------------------------------------


@attrs.frozen
class Nearest:
    """One corpus's part of a dense retrieval (`VectorIndex.nearest`)."""

    hits: tuple[Hit, ...]
    """The corpus's rows closest to the query, best first: its k nearest, or fewer when
    searched in one walk of its namespace's graph (its rows among the namespace's nearest)."""
    live: int
    """The corpus's live rows."""
    mean: float
    """The query's mean cosine over them (`VectorIndex.background`)."""
    k: int = 0
    """How many rows were asked for."""

    @property
    def complete(self) -> bool:
        """Whether `hits` holds the corpus's k nearest (or all its rows): a short walk's hits
        are still its nearest, but none deeper."""
        return len(self.hits) >= min(self.k, self.live)


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
    _ns_graphs: dict[int, NamespaceGraph] = attrs.field(factory=dict, init=False)
    """Each large namespace's graph (`sources.storage._ann`), by namespace id."""
    _no_ann: bool = attrs.field(default=False, init=False)  # no usearch: every search stays exact
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    # (ns_id, corpus, matrix generation, rows, query bytes) -> every row's 8-bit product with the
    # query (`Exact.approx`): the sources of a turn (and the reference) search one matrix with one
    # query, typed or not.
    _scores: OrderedDict[tuple[int, int, int, int, bytes], Vectors] = attrs.field(factory=OrderedDict)

    def search(
        self,
        conn: Reader,
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
            if matrix.uses_graph or matrix.live == 0 or k <= 0:
                return matrix.search(q, k, typed)
            exact = self._exact(slot, matrix, q, k, typed)
        return exact()

    def nearest(self, conn: Reader, slots: Sequence[Slot], query: Vectors, k: int) -> list[Nearest]:
        """The nearest rows of several corpora of one namespace for one query, and each one's
        `background`, each matrix caught up once.

        A namespace with a graph (`open_graph`) is searched in one walk of it: each corpus gets
        its rows among the namespace's nearest (`sources.storage._matrix.graph_nearest`), so a corpus
        far from the query may get fewer than `k`. Measured in hybrid turns at 100k
        (`benchmarks.turn_cost`'s store: corpora of 77k, 15k and 6k vectors; 2 cores, 2026-12-05,
        two runs alternated): the retrieval took 1.1 ms (p50) against 2.3 through a graph of the
        77k and exact searches of the
        others. Without a graph, or while a corpus's matrix is not attached to it (loaded by a
        search since the last warm), each corpus is searched on its own (`search`, untyped), one
        after another on the caller's thread: running the searches on helper threads at once
        was measured and dropped (each waits on memory, and on 2 cores three searches at once
        cost more CPU for no shorter turn)."""
        q = np.asarray(query, dtype=np.float32)
        with self._lock:
            matrices = [self._fresh(conn, s.ns_id, s.corpus) for s in slots]
            backgrounds = [(m.live, m.mean_cosine(q)) for m in matrices]
            graph = _shared_graph(matrices)
            if graph is not None:
                found = graph_nearest(graph, matrices, q, k)
            else:
                runs = [self._searcher(s, m, q, k) for s, m in zip(slots, matrices, strict=True)]
        if graph is None:
            found = [run() for run in runs]
        return [Nearest(tuple(h), live, mean, k) for h, (live, mean) in zip(found, backgrounds, strict=True)]

    def _searcher(self, slot: Slot, matrix: Matrix, q: Vectors, k: int) -> Callable[[], list[Hit]]:
        """An untyped search of one caught-up matrix (taken under the lock): through the graph
        now, or exactly when called (outside the lock, `_exact`)."""
        if not matrix.uses_graph:
            return self._exact(slot, matrix, q, k, None)
        hits = matrix.search(q, k, None)
        return lambda: hits

    def _exact(
        self, slot: Slot, matrix: Matrix, q: Vectors, k: int, typed: frozenset[str] | None
    ) -> Callable[[], list[Hit]]:
        """An exact search of a caught-up matrix (taken under the lock, run outside it): a
        snapshot of its rows, and the query's 8-bit products with them kept for the next search of
        the same rows and query (the sources of a turn, typed or not). A snapshot of at most
        `shortlist(k)` rows re-scores every row and needs none."""
        if matrix.live == 0 or k <= 0:
            return list
        snapshot = matrix.exact(typed)
        key = (slot.ns_id, slot.corpus, matrix.generation, matrix.n, q.tobytes())
        kept = self._scores.get(key)

        def run() -> list[Hit]:
            scores = kept
            if scores is None and len(snapshot.rowids) > shortlist(k):
                scores = snapshot.approx(q)  # outside the lock
                with self._lock:
                    self._scores[key] = scores
                    while len(self._scores) > _SCORES_KEPT:
                        self._scores.popitem(last=False)
            return snapshot.search(q, k, scores)

        return run

    def cosines(self, conn: Reader, slot: Slot, rowids: Sequence[int], query: Vectors) -> dict[int, float]:
        """The query's cosines with the stored vectors of some rows of one namespace and
        corpus, from the matrix in memory (the same vectors `Reader.stored_vectors` reads; a
        row without a vector of this model is absent)."""
        q = np.asarray(query, dtype=np.float32)
        with self._lock:
            return self._fresh(conn, slot.ns_id, slot.corpus).cosines(rowids, q)

    def background(self, conn: Reader, slot: Slot, query: Vectors) -> tuple[int, float]:
        """(live rows, mean cosine of the query over them): how close the namespace is to the
        query in general, the background its best match stands out from.

        One dot product with the sum of the live vectors, which each matrix keeps.
        """
        q = np.asarray(query, dtype=np.float32)
        with self._lock:
            matrix = self._fresh(conn, slot.ns_id, slot.corpus)
            return matrix.live, matrix.mean_cosine(q)

    def warm(self, conn: Reader, slot: Slot) -> int:
        """Load (or catch up) the matrix of one namespace and corpus now and open its
        namespace's HNSW graph (`load`, then `open_graph`); return its live rows."""
        live = self.load(conn, slot)
        self.open_graph(slot.ns_id)
        return live

    def load(self, conn: Reader, slot: Slot) -> int:
        """Load (or catch up) the matrix of one namespace and corpus now; return its live rows.

        A cold load reads every vector of the namespace (about 1 s at 100k): it belongs before
        the first turn, never inside its deadline.
        """
        with self._lock:
            return self._fresh(conn, slot.ns_id, slot.corpus).live

    def open_graph(self, ns_id: int) -> None:
        """Open the HNSW graph of a namespace whose loaded matrices hold more than the exact
        limit of live rows between them, over all of them (`sources.storage._ann`): restored from
        beside the database, or built (seconds to minutes), and attached to each of them; a
        graph already open is brought up to date with matrices reloaded since. It reads
        nothing, so a store opens it outside any snapshot (after `load`ing every corpus)."""
        with self._lock:
            matrices = [m for (ns, _), m in sorted(self._cache.items()) if ns == ns_id]
            current = self._ns_graphs.get(ns_id)
            if not matrices or (current is not None and all(m.ann is current for m in matrices)):
                return
            if self._no_ann or (current is None and sum(m.live for m in matrices) <= self.exact_limit):
                return
            path = None
            if self.graphs is not None:
                path = _ann.graph_path(self.graphs, ns_id, self.model_id)
                _ann.retire_corpus_graphs(self.graphs, ns_id, self.model_id)
            graph = open_namespace_graph(matrices, path, current)
            if graph is None:
                self._no_ann = True
                return
            self._ns_graphs[ns_id] = graph

    def uses_ann(self, conn: Reader, slot: Slot) -> bool:
        """Whether searches of this namespace and corpus go through its namespace's HNSW graph."""
        with self._lock:
            return self._fresh(conn, slot.ns_id, slot.corpus).uses_graph

    def stale(self, conn: Reader, slot: Slot) -> int:
        """Count stored vectors of this namespace and corpus made by another model."""
        with self._lock:
            return self._fresh(conn, slot.ns_id, slot.corpus).stale

    def persist(self) -> None:
        """Save every HNSW graph that changed since it was saved (the store calls it on close)."""
        with self._lock:
            for graph in self._ns_graphs.values():
                graph.persist()

    def invalidate(self) -> None:
        """Drop every cached matrix and graph (after a reindex)."""
        with self._lock:
            self._cache.clear()
            self._ns_graphs.clear()
            self._scores.clear()

    def _fresh(self, conn: Reader, ns_id: int, corpus: int) -> Matrix:
        """The matrix of (ns_id, corpus), caught up with every committed write of any process.

        The tombstone bounds are read before any row, so whatever the row reads see is at
        least as new: a change missed here is caught by the next search.
        """
        oldest, newest = conn.tombstone_bounds()
        matrix = self._cache.get((ns_id, corpus))
        if matrix is None or oldest > matrix.tomb + 1:  # new, or behind the tombstones kept
            return self._load(conn, ns_id, corpus, newest)
        if newest > matrix.tomb:
            matrix.remove(t.vector_id for t in conn.vector_tombstones(Slot(ns_id, corpus), matrix.tomb))
            matrix.tomb = newest
        rows = conn.vector_rows(Slot(ns_id, corpus), matrix.top)
        if rows:
            matrix.append(rows, self.model_id)
        return matrix

    def _load(self, conn: Reader, ns_id: int, corpus: int, tomb: int) -> Matrix:
        matrix = Matrix(dim=self.dim, exact_limit=self.exact_limit, tomb=tomb)
        # Not attached to the namespace's graph: a load may happen inside a search (first use,
        # after `invalidate`, or behind the tombstones kept), and the graph may lack its rows;
        # bringing it up to date takes long at 1M. The next warm attaches it (`open_graph`).
        matrix.append(conn.vector_rows(Slot(ns_id, corpus), 0), self.model_id)
        self._cache[(ns_id, corpus)] = matrix
        logger.debug("store.vectors.loaded", ns_id=ns_id, corpus=corpus, live=matrix.live, stale=matrix.stale)
        if matrix.stale:
            logger.warning(
                "store.vectors.stale", ns_id=ns_id, corpus=corpus, stale=matrix.stale, hint="run reindex"
            )
        return matrix


def _shared_graph(matrices: Sequence[Matrix]) -> NamespaceGraph | None:
    """The namespace graph every one of these matrices is attached to, if there is one."""
    graph = matrices[0].ann if matrices else None
    return graph if graph is not None and all(m.ann is graph for m in matrices) else None


__all__ = [
    "EXACT_LIMIT",
    "Hit",
    "Nearest",
    "Slot",
    "VectorIndex",
    "Vectors",
    "from_blobs",
    "to_blob",
]
