"""HNSW graphs of large namespaces, kept beside the database between processes.

A namespace whose corpora hold more than `_vectors.EXACT_LIMIT` live vectors between them has
one HNSW graph (`usearch`, an optional dependency imported only then) over the vectors of all
its corpora (`NamespaceGraph`), keyed by vector id: ids are AUTOINCREMENT over every corpus,
never given to another vector, so a key always names one stored vector of one corpus. A turn's
dense retrieval (`VectorIndex.nearest`, every corpus at once) is then one walk of one graph,
not one search per corpus; a search of one corpus keeps the graph's hits of that corpus.

Building a graph takes minutes at a million vectors on 2 cores, so it is saved in the
directory beside the database (`<database>.ann/`, one file per namespace and model) when it
is built and when the store closes, and restored when the namespace is next warmed, by any
process. A restored graph is brought up to date by comparing its keys with the live vector
ids (vectors added, deleted or replaced since it was saved, by any process), and a sample of
its vectors is compared with the stored ones first: a graph of another database or model is
rebuilt, never used. A graph only proposes candidates: every hit is mapped back to its row
within the namespace and its cosine recomputed from the stored vector.

A graph that cannot be saved (read-only directory, full disk) is logged and kept in memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from typing import TYPE_CHECKING, Any, Final

import attrs
import numpy as np

from broker.log import get_logger

if TYPE_CHECKING:
    from pathlib import Path

    import numpy.typing as npt

logger = get_logger(__name__)

ANN_EXPANSION: Final = 512
"""usearch `expansion_search` (ef): candidates kept while walking a graph of `LIGHT_BELOW`
vectors or more (connectivity 16; a smaller one: `LIGHT_EXPANSION_SEARCH`).

Measured at 10k x 384: recall@10 0.61 at ef 128 and 0.95 at ef 512 on isotropic Gaussian
vectors (the hard case), 1.0 on clustered ones; see benchmarks/ann_recall.py.
"""
LIGHT_EXPANSION_SEARCH: Final = 256
"""The `expansion_search` of a graph under `LIGHT_BELOW` (`expansion_search`).

Measured (`usearch` 2.26, `benchmarks.ann_recall`'s clustered 384-d vectors, 200 queries,
`expansion_add` 64, 2 cores, 2026-12-05): recall against exact search at 100k 0.9990 at ef 256
against 0.9985 at 512 for the top 10 and 0.9986 against 0.9983 for the top 50 (a turn's
`REFERENCE_DEPTH`), a search's p50 0.27 against 0.48 ms (top 10) and 0.46 against 0.73 (top
50); at 240k 0.9815 against 0.9875 (top 10) and 0.9901 against 0.9910 (top 50), 0.46 against
0.62 and 0.69 against 0.79 ms. In 100k hybrid turns the store's nearest vectors of its three
corpora took 1.9 against 2.5 ms (p50)."""
ANN_DTYPE: Final = "i8"  # ScalarKind.I8, checked on restore
"""The graph's own copy of the vectors, quantised to 8 bits (a unit vector's components times
127): a quarter of float32's memory, and searched with the processor's integer dot products.
The graph only proposes candidates; every hit is re-scored exactly from the stored float32
vector. Measured (`usearch` 2.26, 20k real MiniLM embeddings of synthetic memories, 300 task
queries, 100 asked, 2 cores): the same recall as half precision at every ef (recall@50 0.964
against 0.962 at ef 512, 0.889 against 0.888 at 256), a search 0.69 against 2.08 ms at ef 512,
the build 1.8 against 3.0 s. A graph saved in another precision is rebuilt when restored."""
_QUANTUM: Final = 1 / 127  # the largest gap between a stored component and its 8-bit copy
_CHECKED: Final = 16  # vectors of a restored graph compared with the stored ones
SERIAL_BELOW: Final = 20_000
"""Vectors added to a graph one at a time, on one thread, while the graph holds fewer than this.

usearch adds a batch on every core, and vectors inserted at the same moment do not see each
other: in a small graph that leaves vectors no search reaches. Measured (`usearch` 2.26, 300
graphs of 70 random 384-d vectors, f16, 2 cores): a true top-5 missing from the top-10 in 49 of
1,200 searches built on both cores, 0 of 1,200 built on one; at 6,000 clustered vectors
recall@10 0.9985 vs 1.0, build 0.41 vs 0.82 s. Large builds keep every core (a 1M build would
take several times longer on one)."""

LIGHT_EXPANSION_ADD: Final = 64
"""usearch `expansion_add` (candidates kept while linking a new vector) of a graph under `LIGHT_BELOW`."""
EXPANSION_ADD: Final = 128  # usearch's default
LIGHT_BELOW: Final = 250_000
"""A graph that will hold fewer vectors than this links each new one with `LIGHT_EXPANSION_ADD`,
a larger one with `EXPANSION_ADD` (`expansion_add`); it is searched with
`LIGHT_EXPANSION_SEARCH`, a larger one with `ANN_EXPANSION` (`expansion_search`).

A graph's quality needs grow with its size, and linking is most of a build. Measured
(`usearch` 2.26, `benchmarks.ann_recall`'s clustered 384-d vectors, 200 queries, ef 512, 2
cores, 2026-12-04, `expansion_add` fixed by hand for the comparison): recall@10 against exact
search at 100k 0.998 at 64 against 1.000 at 128, load and build 5.3 against 8.3 s (through this
module, in another run: 0.999, 3.9 s); at 300k 0.9825 against 0.9975, 21.0 against 33.0 s; at 1M
0.9385 against 0.9815 (issue 13's floor is 0.97), so large graphs keep 128."""

Graph = Any  # usearch.index.Index: optional and untyped


def new_graph(dim: int) -> Graph | None:
    """Return an empty HNSW graph, or None (search stays exact) when usearch is not installed."""
    try:
        from usearch.index import Index  # noqa: PLC0415 - optional, only above the exact limit
    except ImportError:
        logger.warning("store.vectors.no_ann", hint="install usearch for HNSW search of large namespaces")
        return None
    return Index(ndim=dim, metric="ip", dtype=ANN_DTYPE, expansion_search=expansion_search(0))


def add(graph: Graph, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
    """Add vectors to the graph: on one thread while the graph is small (`SERIAL_BELOW`)."""
    if len(ids) == 0:
        return
    size = len(graph) + len(ids)
    graph.expansion_add = expansion_add(size)  # not saved with the graph: set before each add
    graph.expansion_search = expansion_search(size)
    graph.add(ids, vectors, threads=1 if size < SERIAL_BELOW else 0)


def expansion_add(size: int) -> int:
    """The `expansion_add` of a graph that will hold `size` vectors (`LIGHT_BELOW`)."""
    return LIGHT_EXPANSION_ADD if size < LIGHT_BELOW else EXPANSION_ADD


def expansion_search(size: int) -> int:
    """The `expansion_search` of a graph holding `size` vectors (`LIGHT_BELOW`)."""
    return LIGHT_EXPANSION_SEARCH if size < LIGHT_BELOW else ANN_EXPANSION


def graph_path(directory: Path, ns_id: int, model_id: str) -> Path:
    """Where the graph of one namespace and model is kept."""
    return directory / f"ns{ns_id}-{_model_key(model_id)}.usearch"


def retire_corpus_graphs(directory: Path, ns_id: int, model_id: str) -> None:
    """Delete the graphs of single corpora that versions before the namespace graph kept for this
    namespace and model (`ns<id>-corpus<n>-<model>.usearch`): nothing reads them any more."""
    for old in directory.glob(f"ns{ns_id}-corpus*-{_model_key(model_id)}.usearch"):
        try:
            old.unlink()
        except OSError as exc:
            logger.warning("store.vectors.graph_not_removed", path=str(old), error=str(exc))
        else:
            logger.info("store.vectors.graph_retired", path=str(old))


def _model_key(model_id: str) -> str:
    return hashlib.sha256(model_id.encode()).hexdigest()[:16]


def open_graph(
    path: Path | None, dim: int, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]
) -> Graph | None:
    """The graph of these live vectors (`ids` with their rows): restored from `path` and
    brought up to date when a graph of the same vectors is kept there, else built (and saved).
    None when usearch is not installed."""
    graph = _restored(path, dim, ids, vectors) if path is not None else None
    if graph is not None:
        changed = catch_up(graph, ids, vectors)
        logger.debug("store.vectors.graph_restored", path=str(path), vectors=len(ids), changed=changed)
        if changed:
            save(graph, path)
        return graph
    graph = new_graph(dim)
    if graph is None:
        return None
    add(graph, ids, vectors)
    save(graph, path)
    return graph


def save(graph: Graph, path: Path | None) -> None:
    """Write the graph to `path` atomically (a reader never sees half a file); log a failure."""
    if path is None:
        return
    # A name of its own: two stores of one database in one process (or two processes) may
    # save the same graph at once, and must not write into one temporary file.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        graph.save(str(tmp))
        tmp.replace(path)
    except (OSError, RuntimeError) as exc:  # usearch reports a failed write (full disk) as RuntimeError
        logger.warning("store.vectors.graph_not_saved", path=str(path), error=str(exc))
        with contextlib.suppress(OSError):
            tmp.unlink()


def _restored(
    path: Path, dim: int, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]
) -> Graph | None:
    """The graph kept at `path` if it holds these vectors (a sample agrees exactly), else None."""
    if not path.exists():
        return None
    try:
        from usearch.compiled import ScalarKind  # noqa: PLC0415 - optional
        from usearch.index import Index  # noqa: PLC0415 - optional
    except ImportError:
        return None
    try:
        graph = Index.restore(str(path))
    except (ValueError, RuntimeError, OSError) as exc:
        logger.warning("store.vectors.graph_unreadable", path=str(path), error=str(exc))
        return None
    if graph is None or graph.ndim != dim or graph.dtype != ScalarKind.I8:
        logger.info("store.vectors.graph_rebuilt", path=str(path), reason="another shape or precision")
        return None
    if not _agrees(graph, ids, vectors):
        logger.info("store.vectors.graph_rebuilt", path=str(path), reason="not these vectors")
        return None
    graph.expansion_search = expansion_search(len(graph))  # type: ignore[misc] # not saved with the graph; the stubs say read-only
    return graph


def _agrees(graph: Graph, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> bool:
    """Whether the graph's vectors of a sample of the live ids it holds are the stored ones
    (each component within the graph's 8-bit step).

    A graph holding none of the live ids (another database, or every vector re-embedded)
    does not agree: rebuilding it costs no more than re-adding every vector.
    """
    held = np.flatnonzero(graph.contains(ids)) if len(ids) else np.empty(0, dtype=np.int64)
    if len(held) == 0:
        return False
    picked = held[np.linspace(0, len(held) - 1, min(_CHECKED, len(held))).astype(np.int64)]
    got = np.vstack(graph.get(ids[picked])).astype(np.float32) / 127
    return bool(np.all(np.abs(got - vectors[picked]) <= _QUANTUM))


def catch_up(graph: Graph, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> int:
    """Make the graph's keys the live ids: drop the deleted, add the new; return the changes."""
    keys = np.asarray(graph.keys, dtype=np.int64)
    gone = np.setdiff1d(keys, ids, assume_unique=True)
    if len(gone):
        graph.remove(gone)
    new = ~np.isin(ids, keys)
    add(graph, ids[new], vectors[new])
    return len(gone) + int(new.sum())


@attrs.define(eq=False)
class NamespaceGraph:
    """One namespace's graph over the live vectors of every corpus it holds (`graph_path`).

    The namespace's matrices share it and keep it current: each adds the vectors written to it
    and removes the ones deleted (`sources.storage._matrix.Matrix`). `dirty` says it changed since it
    was saved.
    """

    index: Graph
    path: Path | None
    dirty: bool = False

    def __len__(self) -> int:
        return len(self.index)

    @property
    def expansion_search(self) -> int:
        """The candidates a walk keeps (`expansion_search`): up to this many hits cost one walk."""
        return int(self.index.expansion_search)

    def search(self, query: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.int64]:
        """The keys (vector ids) of the graph's `count` nearest to a unit query, nearest first."""
        return np.asarray(self.index.search(query, count).keys, dtype=np.int64)

    def add(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Add vectors written since the graph was opened."""
        add(self.index, ids, vectors)
        self.dirty = self.dirty or len(ids) > 0

    def remove(self, vector_id: int) -> None:
        """Remove a deleted (or replaced) vector."""
        self.index.remove(vector_id)
        self.dirty = True

    def catch_up(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Make the graph's keys these live ids (`catch_up`)."""
        if catch_up(self.index, ids, vectors):
            self.dirty = True

    def persist(self) -> None:
        """Save the graph if it changed since it was saved."""
        if self.dirty:
            save(self.index, self.path)
            self.dirty = False


__all__ = [
    "ANN_DTYPE",
    "ANN_EXPANSION",
    "EXPANSION_ADD",
    "LIGHT_BELOW",
    "LIGHT_EXPANSION_ADD",
    "LIGHT_EXPANSION_SEARCH",
    "SERIAL_BELOW",
    "Graph",
    "NamespaceGraph",
    "add",
    "catch_up",
    "expansion_add",
    "expansion_search",
    "graph_path",
    "new_graph",
    "open_graph",
    "retire_corpus_graphs",
    "save",
]
