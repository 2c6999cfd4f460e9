"""The namespace's best evidence for a query (`Reference`), computed once and shared.

Dense and hybrid scores use it (lexical mode does not).

Relative features ("is this the namespace's best match?") must mean the same whichever
source scores a text, so the reference is a function of the query and the namespace only:
over every corpus the namespace holds (entries, facts, knowledge), never the typed subset
or one source's candidates.

- lexical: the best `bm25_norm` and `coverage` among the namespace's `REFERENCE_DEPTH` best
  FTS matches (ranked by FTS5's BM25 on the namespace's own table);
- dense: the best cosine of the query with any stored vector of the namespace.

Every source of a turn asks for the same reference at about the same time, so the store
computes it once (`sources._singleflight`) and keeps recent ones keyed by the namespace's
write generation, which every write of the namespace bumps (schema triggers): a reference is
never served after a change to what it summarises.

The dense part loads the namespace's facts and knowledge matrices too (the first dense
turn of a namespace pays for it, and they stay in memory like the entries' matrix).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from . import _analysis, _schema
from ._relevance import QueryProfile, Reference, lexical_features

if TYPE_CHECKING:
    import sqlite3

    import numpy as np
    import numpy.typing as npt

    from ._vectors import VectorIndex

REFERENCE_DEPTH: Final = 50
"""Top FTS matches over which the namespace's best lexical evidence is taken."""
_CORPORA: Final = (_schema.CORPUS_ENTRIES, _schema.CORPUS_FACTS, _schema.CORPUS_KNOWLEDGE)


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


__all__ = ["REFERENCE_DEPTH", "compute_reference"]
