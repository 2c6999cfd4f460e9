"""The namespace's best evidence for a query (`Reference`), computed once and shared.

Dense and hybrid scores use it (lexical mode does not).

Relative features ("is this the namespace's best match?") must mean the same whichever
source scores a text, so the reference is a function of the query and the namespace only:
over every corpus the namespace holds (entries, facts, knowledge), never the typed subset
or one source's candidates.

- lexical: the best `bm25_norm` and `coverage` among the namespace's `REFERENCE_DEPTH` best
  FTS matches (ranked by FTS5's BM25 on the namespace's own table);
- dense: the best cosine of the query with any stored vector of the namespace.

Every source of a turn asks for the same reference at about the same time, so it is
computed once (the first caller computes it, concurrent callers wait for it) and kept for
`TTL_SECONDS`, keyed by the namespace's document count and total length, which every write
of the namespace changes. A write that keeps both (replacing a text by one of the same
length) within the TTL can leave a reference up to `TTL_SECONDS` old: it shifts scores
slightly, never across namespaces. A thread waiting for another's computation gives up as
soon as its own read is interrupted (`interruptible`), so a cancelled turn does not wait.

The dense part loads the namespace's facts and knowledge matrices too (the first dense
turn of a namespace pays for it, and they stay in memory like the entries' matrix).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Final

from . import _analysis, _schema
from ._relevance import NO_REFERENCE, QueryProfile, Reference, lexical_features

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import numpy as np
    import numpy.typing as npt

    from ._vectors import VectorIndex

REFERENCE_DEPTH: Final = 50
"""Top FTS matches over which the namespace's best lexical evidence is taken."""
TTL_SECONDS: Final = 2.0
_CACHED: Final = 256
_CORPORA: Final = (_schema.CORPUS_ENTRIES, _schema.CORPUS_FACTS, _schema.CORPUS_KNOWLEDGE)

Key = tuple[object, ...]


def compute_reference(
    conn: sqlite3.Connection,
    ns_id: int,
    prof: QueryProfile,
    query_vector: npt.NDArray[np.float32] | None,
    vindex: VectorIndex | None,
) -> Reference:
    """The namespace's best lexical evidence and best cosine (None without a query vector)."""
    return Reference(
        **_lexical_best(conn, ns_id, prof),
        best_cosine=_dense_best(conn, ns_id, query_vector, vindex),
    )


def _lexical_best(conn: sqlite3.Connection, ns_id: int, prof: QueryProfile) -> dict[str, float]:
    if not prof.present:
        return {"best_bm25": 0.0, "best_coverage": 0.0}
    table = _schema.fts_table(ns_id)
    rows = conn.execute(
        f"SELECT b.body FROM (SELECT rowid AS r, bm25({table}) AS rank FROM {table} "
        f"WHERE {table} MATCH ? ORDER BY rank LIMIT ?) AS top JOIN {table} b ON b.rowid = top.r",
        (_analysis.fts_query(tuple(sorted(prof.present))), REFERENCE_DEPTH),
    ).fetchall()
    feats = [lexical_features(prof, str(r[0]).split()) for r in rows]
    return {
        "best_bm25": max((f.bm25_norm for f in feats), default=0.0),
        "best_coverage": max((f.coverage for f in feats), default=0.0),
    }


def _dense_best(
    conn: sqlite3.Connection,
    ns_id: int,
    query_vector: npt.NDArray[np.float32] | None,
    vindex: VectorIndex | None,
) -> float | None:
    if query_vector is None or vindex is None:
        return None
    best = [h.cosine for corpus in _CORPORA for h in vindex.search(conn, ns_id, corpus, query_vector, 1)]
    return max(best, default=None)


_POLL_SECONDS: Final = 0.005
_thread = threading.local()


@contextlib.contextmanager
def interruptible(interrupted: Callable[[], bool]) -> Iterator[None]:
    """Within this block (in this thread), a wait for another thread's reference gives up
    with `sqlite3.OperationalError("interrupted")` once `interrupted()` is true, as an
    interrupted read does: a cancelled turn never waits on another turn's computation."""
    before = getattr(_thread, "interrupted", None)
    _thread.interrupted = interrupted
    try:
        yield
    finally:
        _thread.interrupted = before


def _wait(event: threading.Event) -> None:
    check: Callable[[], bool] | None = getattr(_thread, "interrupted", None)
    if check is None:
        event.wait()
        return
    while not event.wait(_POLL_SECONDS):
        if check():
            raise sqlite3.OperationalError("interrupted")


class ReferenceCache:
    """Recent references, each computed once even when many threads ask at once."""

    def __init__(self, ttl: float = TTL_SECONDS) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._done: OrderedDict[Key, tuple[float, Reference]] = OrderedDict()
        self._pending: dict[Key, threading.Event] = {}

    def get(self, key: Key, compute: Callable[[], Reference]) -> Reference:
        """The cached reference of `key`, or `compute()`'s (which is then cached)."""
        while True:
            with self._lock:
                hit = self._done.get(key)
                if hit is not None and time.monotonic() - hit[0] < self._ttl:
                    return hit[1]
                waiting = self._pending.get(key)
                if waiting is None:
                    mine = self._pending[key] = threading.Event()
            if waiting is not None:
                _wait(waiting)
                continue
            try:
                ref = compute()
                with self._lock:
                    self._done[key] = (time.monotonic(), ref)
                    self._done.move_to_end(key)
                    while len(self._done) > _CACHED:
                        self._done.popitem(last=False)
                return ref
            finally:
                with self._lock:
                    del self._pending[key]
                mine.set()

    def clear(self) -> None:
        """Forget every reference (after a reindex)."""
        with self._lock:
            self._done.clear()


__all__ = ["NO_REFERENCE", "REFERENCE_DEPTH", "ReferenceCache", "compute_reference", "interruptible"]
