"""The in-memory matrix of one (namespace, corpus): exact search, and the HNSW graph of its
namespace above the exact limit (`sources.storage._ann`). `sources.storage._vectors` keeps
matrices current with the database."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Final

import attrs
import numpy as np
import numpy.typing as npt

from broker.log import get_logger

from . import _ann
from ._quantised import Codes, Vectors, approx_dot, dot, from_blobs, quantise, shortlist
from ._runs import Hit

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    from ._ann import NamespaceGraph


logger = get_logger(__name__)

_GENERATIONS = itertools.count()
_LOGGED_IDS: Final = 20  # damaged vector ids named in a warning
_LOWEST = np.float32(-3e38)  # a NaN 8-bit product ranks here: below every number, above masked rows
_TYPED_OVERFETCH = 8  # the graph is asked for k * this when a typed filter drops rows after search
_OVERFETCH = 4
"""The graph is asked for k * this, re-scored exactly, cut to k: the graph ranks by 8-bit vectors,
which swap near ties. Measured (`usearch` 2.26, `benchmarks.ann_recall`'s clustered 384-d
vectors, 200 queries, ef 512, 2 cores, 2026-12-02): recall@10 against exact search at 100k 0.967
asking for 2k, 0.9995 for 4k or 8k; at 1M 0.9125 for 2k, 0.9815 for 4k, 0.989 for 8k; a search's
p50 1.64 / 1.63 / 1.73 ms at 1M (0.60 / 0.64 / 0.71 at 100k): re-scoring 4k rows costs nothing
the walk does not (its `ef` already holds 512)."""


GRAPH_HIT_ROWS: Final = 48
"""About how many rows an exact search reads in the time a graph walk takes per hit asked for
beyond its `expansion_search` (up to which a walk costs the same). A search of one corpus asks
its namespace's graph for more hits the smaller the corpus's share of it (k times the overfetch
times the graph's size over the corpus's), and reads the corpus's rows exactly instead once the
hits asked for beyond the walk's own, times this, exceed its rows. Measured (the 98k graph of
`benchmarks.turn_cost`'s 100k hybrid store, ef 256, its 15k corpus, 200 task queries, hot
caches, 2 cores, 2026-12-05): a walk for 40 / 262 / 1,024 / 2,048 hits 0.33 / 0.35 / 1.25 /
2.44 ms p50, an exact search of the 15k rows 0.38 ms: about 1.2 us a hit beyond 256, 0.025 us a
row."""


TYPED_EXACT_LIMIT = 5_000
"""A typed search of a matrix with a graph stays exact while its typed rows are at most this
many (and the matrix's own exact limit): it gathers those rows' vectors first, which costs more
than the graph beyond a few thousand."""


Row = tuple[int, int, str, bytes, str | None]  # (vector id, src_rowid, model_id, vec, memory_type)


@attrs.define(eq=False)
class Matrix:
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
    i8: Codes = attrs.field(factory=lambda: np.empty((0, 0), dtype=np.int8))  # `buf` quantised
    i8_scale: Vectors = attrs.field(factory=lambda: np.empty(0, dtype=np.float32))
    rowids: npt.NDArray[np.int64] = attrs.field(factory=lambda: np.empty(0, dtype=np.int64))
    alive: npt.NDArray[np.bool_] = attrs.field(factory=lambda: np.empty(0, dtype=np.bool_))
    tags: npt.NDArray[np.int16] = attrs.field(factory=lambda: np.empty(0, dtype=np.int16))
    codes: dict[str | None, int] = attrs.field(factory=lambda: {None: 0})
    vids: npt.NDArray[np.int64] = attrs.field(factory=lambda: np.empty(0, dtype=np.int64))  # position -> id
    position: dict[int, int] = attrs.field(factory=dict)  # src_rowid -> position
    by_id: dict[int, int] = attrs.field(factory=dict)  # vector id -> position
    ann: NamespaceGraph | None = None
    """The graph of the matrix's namespace (shared with its other corpora, keyed by vector id),
    once a warm opened it (`open_namespace_graph`); the matrix adds and removes its rows there."""
    total: npt.NDArray[np.float64] = attrs.field(init=False)
    """The sum of the live vectors: the query's mean cosine over them is one dot product."""
    generation: int = attrs.field(factory=lambda: next(_GENERATIONS))
    """Unique per matrix: with `n` it names the rows a cosine vector was computed over."""

    def __attrs_post_init__(self) -> None:
        self.total = np.zeros(self.dim, dtype=np.float64)

    def mean_cosine(self, query: Vectors) -> float:
        """The query's mean cosine over the live vectors (0 without any)."""
        return float(self.total @ query / self.live) if self.live else 0.0

    @property
    def stale(self) -> int:
        """Rows of another model."""
        return len(self.stale_ids)

    def append(self, rows: Sequence[Row], model_id: str) -> None:
        """Add stored rows of the current model (others only counted as stale; damaged ones,
        of another length or holding NaN or infinity, logged and left out: `_usable`)."""
        if rows:
            self.top = max(self.top, rows[-1][0])
        self.stale_ids.update(r[0] for r in rows if r[2] != model_id)
        mine, block = self._usable([r for r in rows if r[2] == model_id])
        if not mine:
            return
        self._reserve(self.n + len(mine))
        start = self.n
        self.buf[start : start + len(mine)] = block
        self.i8[start : start + len(mine)], self.i8_scale[start : start + len(mine)] = quantise(block)
        self.total += block.sum(axis=0, dtype=np.float64)
        for i, r in enumerate(mine):
            old = self.position.get(r[1])
            if old is not None:  # the source row's vector was replaced
                self._kill(old)
            self.position[r[1]] = start + i
            self.by_id[r[0]] = start + i
            self.vids[start + i] = r[0]
            self.rowids[start + i] = r[1]
            self.alive[start + i] = True
            self.tags[start + i] = self.codes.setdefault(r[4], len(self.codes))
        self.n += len(mine)
        self.live += len(mine)
        if self.ann is not None:
            self.ann.add(self.vids[start : self.n], block)

    def _usable(self, rows: list[Row]) -> tuple[list[Row], Vectors]:
        """The rows a search can use, with their vectors: a stored vector of another length
        than the matrix's, or holding NaN or infinity (written around the store's checked
        embedder), would fail every load or poison the mean cosine, so it is logged and left
        out; its memory is searched as one without a vector until it is written again."""
        size = 4 * self.dim
        sized = rows if all(len(r[3]) == size for r in rows) else [r for r in rows if len(r[3]) == size]
        block = from_blobs([r[3] for r in sized], self.dim)
        # A row's sum is NaN or infinite when one of its values is (float64: no overflow).
        finite = np.isfinite(block.sum(axis=1, dtype=np.float64))
        if len(sized) == len(rows) and finite.all():
            return sized, block
        kept = [r for r, ok in zip(sized, finite.tolist(), strict=True) if ok]
        bad = sorted({r[0] for r in rows} - {r[0] for r in kept})
        logger.warning(
            "store.vectors.damaged",
            vector_ids=bad[:_LOGGED_IDS],
            count=len(bad),
            hint="reindex embeds those of another length again; write the others again with replace=True",
        )
        return kept, block[finite]

    def cosines(self, rowids: Sequence[int], query: Vectors) -> dict[int, float]:
        """The query's cosines with the current vectors of some source rows, in one product
        (a row without one is absent)."""
        held = [(r, pos) for r in rowids if (pos := self.position.get(r)) is not None]
        if not held:
            return {}
        at = np.fromiter((pos for _, pos in held), np.int64, len(held))
        return dict(zip((r for r, _ in held), dot(self.buf[at], query).tolist(), strict=True))

    @property
    def uses_graph(self) -> bool:
        """Whether a search of this matrix goes through its namespace's graph: it is attached to
        one and holds more live rows than its exact limit (a smaller corpus is read whole)."""
        return self.ann is not None and self.live > self.exact_limit

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
            self.total -= self.buf[pos]
            if self.ann is not None:
                self.ann.remove(int(self.vids[pos]))

    def _reserve(self, size: int) -> None:
        if size <= len(self.rowids):
            return
        cap = max(size, 2 * len(self.rowids), 64)
        buf = np.empty((cap, self.dim), dtype=np.float32)
        i8 = np.empty((cap, self.dim), dtype=np.int8)
        i8_scale = np.empty(cap, dtype=np.float32)
        if self.n:
            buf[: self.n] = self.buf[: self.n]
            i8[: self.n] = self.i8[: self.n]
            i8_scale[: self.n] = self.i8_scale[: self.n]
        rowids = np.zeros(cap, dtype=np.int64)
        rowids[: self.n] = self.rowids[: self.n]
        vids = np.zeros(cap, dtype=np.int64)
        vids[: self.n] = self.vids[: self.n]
        alive = np.zeros(cap, dtype=np.bool_)
        alive[: self.n] = self.alive[: self.n]
        tags = np.zeros(cap, dtype=np.int16)
        tags[: self.n] = self.tags[: self.n]
        self.buf, self.rowids, self.vids, self.alive, self.tags = buf, rowids, vids, alive, tags
        self.i8, self.i8_scale = i8, i8_scale

    def _allowed(self, types: frozenset[str]) -> npt.NDArray[np.int16]:
        """Tag codes a typed query keeps: its types, and unclassified (code 0)."""
        return np.array(
            [0, *(c for t, c in self.codes.items() if t is not None and t in types)], dtype=np.int16
        )

    def exact(self, types: frozenset[str] | None) -> Exact:
        """Snapshot what an exact search reads, so it can run outside the index lock.

        Appends only write rows past `n` (or into a new buffer); deletes after the snapshot
        may still be returned, and the caller's row lookup drops them.
        """
        allowed = None if types is None else self._allowed(types)
        return Exact(
            buf=self.buf[: self.n],
            i8=self.i8[: self.n],
            i8_scale=self.i8_scale[: self.n],
            rowids=self.rowids[: self.n],
            alive=None if self.live == self.n else self.alive[: self.n].copy(),
            tags=None if allowed is None else self.tags[: self.n],
            allowed=allowed,
        )

    def search(self, query: Vectors, k: int, types: frozenset[str] | None) -> list[Hit]:
        """Top-k live rows by cosine (typed: memory_type in types, or unclassified)."""
        if self.live == 0 or k <= 0:
            return []
        if self.uses_graph:
            return self._search_ann(query, k, types)
        return self.exact(types).search(query, k)

    def _search_ann(self, query: Vectors, k: int, types: frozenset[str] | None) -> list[Hit]:
        """The graph's top-k, re-scored exactly; a typed search stays exact while its rows are
        few, and when the graph's nearest hold fewer than k of them. The graph holds every
        corpus of the namespace: the search asks for more hits the smaller the matrix's share of
        it, and reads the rows exactly when that would cost more (`GRAPH_HIT_ROWS`)."""
        typed, allowed = None, None if types is None else self._allowed(types)
        if allowed is not None:
            typed = np.flatnonzero(self.alive[: self.n] & np.isin(self.tags[: self.n], allowed))
            if len(typed) <= min(self.exact_limit, TYPED_EXACT_LIMIT):
                return self._exact_rows(typed, query, k)
        assert self.ann is not None  # noqa: S101 - the caller checked
        share = max(1.0, len(self.ann) / self.live)
        overfetch = _TYPED_OVERFETCH if types is not None else _OVERFETCH
        want = min(len(self.ann), math.ceil(k * overfetch * share))
        if want <= 0 or (want - self.ann.expansion_search) * GRAPH_HIT_ROWS > self.live:
            return self.exact(types).search(query, k)
        pos = self._kept(self.ann.search(query, want), allowed)
        if typed is not None and len(pos) < min(k, len(typed)):
            # The graph's 8k nearest held too few of a type this rare: search its rows exactly.
            return self._exact_rows(typed, query, k)
        if typed is None and len(pos) < min(k, self.live):
            # Removed or stale rows took places among the graph's nearest, or removals cut
            # part of the graph off: fewer than k live rows came back, so search exactly.
            return self.exact(None).search(query, k)
        return self._rescored(pos, query, k)

    def _kept(
        self, keys: npt.NDArray[np.int64], allowed: npt.NDArray[np.int16] | None
    ) -> npt.NDArray[np.int64]:
        """The positions of the graph's hits (vector ids) that are live (and of an allowed type),
        in the graph's order."""
        found = np.fromiter(map(self.by_id.get, keys.tolist(), itertools.repeat(-1)), np.int64, len(keys))
        pos = found[found >= 0]
        pos = pos[self.alive[pos]]
        if allowed is not None:
            pos = pos[np.isin(self.tags[pos], allowed)]
        return pos

    def _rescored(self, pos: npt.NDArray[np.int64], query: Vectors, k: int) -> list[Hit]:
        """The best `k` of some positions re-scored exactly from the stored vectors in one
        product, best first (ties in the graph's order)."""
        cosines = dot(self.buf[pos], query)
        order = np.argsort(-cosines, kind="stable")[:k]
        return [
            Hit(rowid=r, cosine=c)
            for r, c in zip(self.rowids[pos[order]].tolist(), cosines[order].tolist(), strict=True)
        ]

    def _exact_rows(self, positions: npt.NDArray[np.intp], query: Vectors, k: int) -> list[Hit]:
        """Exact top-k among some live positions."""
        return Exact(
            buf=self.buf,
            i8=self.i8[positions],
            i8_scale=self.i8_scale[positions],
            rowids=self.rowids[positions],
            alive=None,
            tags=None,
            allowed=None,
            at=positions,
        ).search(query, k)

    def graph_hits(self, keys: npt.NDArray[np.int64], query: Vectors, k: int) -> list[Hit]:
        """The best `k` of this matrix's live rows among a namespace graph's hits (`keys`, vector
        ids of any corpus), re-scored exactly."""
        pos = self._kept(keys, None)
        return self._rescored(pos, query, k) if len(pos) else []


def open_namespace_graph(
    matrices: Sequence[Matrix], path: Path | None, current: NamespaceGraph | None = None
) -> NamespaceGraph | None:
    """Attach a namespace's matrices (at least one) to one graph over the live rows of them all: `current`
    brought up to date (a matrix was reloaded, or rows changed without it), else the graph kept
    at `path` restored and brought up to date, else a new one (seconds to minutes; saved at
    `path`). None when usearch is not installed."""
    total = sum(m.live for m in matrices)
    ids = np.empty(total, dtype=np.int64)
    vectors = np.empty((total, matrices[0].dim), dtype=np.float32)
    at = 0
    for m in (m for m in matrices if m.live):  # one copy of the rows, not one per matrix and one joined
        live = m.alive[: m.n]
        np.compress(live, m.vids[: m.n], out=ids[at : at + m.live])
        np.compress(live, m.buf[: m.n], axis=0, out=vectors[at : at + m.live])
        at += m.live
    graph = current
    if graph is not None:
        graph.catch_up(ids, vectors)
    else:
        index = _ann.open_graph(path, vectors.shape[1], ids, vectors)
        if index is None:
            return None
        graph = _ann.NamespaceGraph(index=index, path=path)
    for m in matrices:
        m.ann = graph
    return graph


def graph_nearest(
    graph: NamespaceGraph, matrices: Sequence[Matrix], query: Vectors, k: int
) -> list[list[Hit]]:
    """The nearest rows of each of a namespace's matrices in one walk of its graph: each
    matrix's rows among the graph's `k * _OVERFETCH` nearest (of every corpus), re-scored
    exactly, at most `k`. A corpus far from the query may get fewer than `k`, or none: its rows
    are then not among the namespace's nearest, and those it gets are still its nearest.

    Asking for as many as the walk keeps anyway (its `expansion_search`, 256 under 250k
    vectors) was measured and dropped: the walk costs the same, but re-scoring and pooling
    the extra rows made the retrieval 0.1 ms slower (1.18 against 1.07 and 1.09 ms p50, 100k
    hybrid turns of `benchmarks.turn_cost`'s store, 2026-12-05)."""
    want = min(len(graph), k * _OVERFETCH)
    if k <= 0 or want <= 0:  # every vector of the namespace deleted since the graph opened
        return [[] for _ in matrices]
    keys = graph.search(query, want)
    return [m.graph_hits(keys, query, k) for m in matrices]


@attrs.frozen(kw_only=True)
class Exact:
    """An exact search over a snapshot of one matrix: the rows ranked by their 8-bit products
    (`approx_dot`), a shortlist of the best re-scored from the float32 rows, cut to k."""

    buf: Vectors
    """The float32 rows: row i of the snapshot is `buf[at[i]]` (`buf[i]` without `at`)."""
    i8: Codes
    i8_scale: Vectors
    rowids: npt.NDArray[np.int64]
    alive: npt.NDArray[np.bool_] | None
    tags: npt.NDArray[np.int16] | None
    allowed: npt.NDArray[np.int16] | None
    at: npt.NDArray[np.intp] | None = None

    def approx(self, query: Vectors) -> Vectors:
        """Every row's 8-bit product with the query (what `search` takes as `scores`)."""
        return approx_dot(self.i8, self.i8_scale, query)

    def search(self, query: Vectors, k: int, scores: Vectors | None = None) -> list[Hit]:
        """Top-k rows by cosine among the live (and allowed) ones, best first.

        `scores` are `approx(query)` when the caller already has them (never modified here).
        The cosines returned are the float32 products. Approximate only in which rows are
        re-scored: a row whose 8-bit product ranks it below the shortlist is never looked at,
        which near-duplicates of the k-th row (cosines within about 3e-4 of it) can be.
        """
        n = len(self.rowids)
        keep = self._keep()
        live = n if keep is None else int(keep.sum())
        k = min(k, live)
        if k <= 0:
            return []
        wide = min(shortlist(k), live)
        if wide == live:  # every live row is re-scored: no ranking needed
            short = np.arange(n) if keep is None else np.flatnonzero(keep)
        else:
            approx = self.approx(query) if scores is None else scores
            ranked = np.where(np.isnan(approx), _LOWEST, approx)  # a copy: the caller's stays intact
            if keep is not None:
                ranked[~keep] = -np.inf
            short = np.argpartition(-ranked, wide - 1)[:wide]
        cosines = dot(self.buf[short if self.at is None else self.at[short]], query)
        order = np.argsort(-cosines, kind="stable")[:k]
        return [
            Hit(rowid=r, cosine=c)
            for r, c in zip(self.rowids[short[order]].tolist(), cosines[order].tolist(), strict=True)
        ]

    def _keep(self) -> npt.NDArray[np.bool_] | None:
        """The rows a search may return (live, of an allowed type), or None for all of them."""
        if self.alive is None and self.tags is None:
            return None
        keep = np.ones(len(self.rowids), dtype=np.bool_) if self.alive is None else self.alive
        if self.tags is not None and self.allowed is not None:
            keep = keep & np.isin(self.tags, self.allowed)
        return keep
