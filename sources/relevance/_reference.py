"""The namespace's best evidence for a task (`Reference`) and the task's gate, computed once.

Relative features ("how far is this memory behind the namespace's best?") must mean the same
whichever source scores a text, so the reference is a function of the task and the
namespace only: over every corpus the namespace holds (entries, facts, knowledge), never the
typed subset or one source's candidates.

The namespace's candidates for the task are its `REFERENCE_DEPTH` best FTS matches (lexical
and hybrid modes) and the `REFERENCE_DEPTH` nearest vectors of each corpus (dense and hybrid;
in a namespace with an HNSW graph, each corpus's rows among the namespace's nearest,
`VectorIndex.nearest`).
From them: the best BM25 and coverage, the best cosines and the mean cosine of the query over
the namespace (the background), and the base relevance of every candidate (its logit, best
first: the `pool` a memory's rank is read from). The task's gate (`qpp`) is computed from
these and the task (`sources.relevance._gate`).

Every source of a turn asks for the same reference at about the same time, so the store
computes it once (`sources._singleflight`) and keeps recent ones keyed by the namespace's
write generation, which every write of the namespace bumps (schema triggers): a reference is
never served after a change to what it summarises.

The dense part loads the namespace's facts and knowledge matrices too (the first dense
turn of a namespace pays for it, and they stay in memory like the entries' matrix).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import numpy as np

from sources.storage import _analysis
from sources.storage._engine import CORPORA, Slot
from sources.storage._graph_walk import mentioned_texts
from sources.storage._runs import DenseRun, LexicalRun

from . import _batch, _gate
from ._offtopic import closeness, lexical_closeness
from ._relevance import DENSE_MODES, QueryProfile, Reference

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from broker.abc import Embedder
    from sources.storage._engine import Reader
    from sources.storage._quantised import Vectors
    from sources.storage._runs import Hit
    from sources.storage._text_index import TextIndex
    from sources.storage._vectors import VectorIndex

    from ._scorer import Scorer

REFERENCE_DEPTH: Final = 50
"""Candidates per retrieval (FTS matches; nearest vectors of each corpus) the reference reads."""
SHARED_DEPTH: Final = 160
"""FTS matches of each corpus the turn's one lexical retrieval keeps for the sources: as deep as
a source reads for a request of up to 40 memories (`sources._scoring.recall_depth`), so its
candidates come from the shared retrieval, not from an FTS query of its own (about 0.3 ms each,
one or more a turn, at the default budget of 20). The reference reads the first
`REFERENCE_DEPTH` of them."""
_CORPORA: Final = CORPORA

_GRAPH: Final = -1  # the pool's key space of graph nodes (not a stored corpus)

Key = tuple[int, int]  # (corpus, source rowid)


@attrs.frozen
class Indexes:
    """A store's in-memory indexes a reference searches: its vectors (None: the store embeds
    nothing) and its texts (None: the engine's full-text query answers)."""

    vectors: VectorIndex | None = None
    texts: TextIndex | None = None


def compute_reference(
    conn: Reader,
    ns_id: int,
    scorer: Scorer,
    indexes: Indexes = Indexes(),
    *,
    hits: tuple[LexicalRun, ...] | None = None,
) -> Reference:
    """The namespace's best evidence for the scorer's task in its mode, its candidate pool and
    the gate (`scorer` carries the task, its profile, the mode and, in dense modes, the query
    vector and the embedder; its own reference is not read). `hits` are the task's
    `lexical_hits` when the caller has them (ignored in dense mode).

    The pool also holds the graph nodes the task names (name and description), embedded on
    the fly in dense modes: a namespace whose answer is in its graph serves the task too.
    """
    vindex, texts = indexes.vectors, indexes.texts
    dense = scorer.query_vector if scorer.mode in DENSE_MODES and vindex is not None else None
    search = None if dense is None or vindex is None else (dense, vindex)
    if scorer.mode == "dense":
        hits = ()
    elif hits is None:
        hits = lexical_hits(conn, ns_id, scorer.profile, texts)
    nodes = _graph_nodes(conn, ns_id, scorer.query, dense, scorer.embedder)
    found = _with_nodes(_retrieved(conn, ns_id, hits, dense=search, texts=texts), nodes)
    return _gated(scorer, found, dense, names_nodes=bool(nodes))


def _gated(
    scorer: Scorer, found: _Retrieved, dense: Vectors | None, *, names_nodes: bool = False
) -> Reference:
    """The reference of what the retrieval `found` (the pool, the task's closeness to small
    talk, the runs kept for the turn's sources, whether the task names a graph node) with the
    gate's `qpp`."""
    prof, task, mode, embedder = scorer.profile, scorer.query, scorer.mode, scorer.embedder
    if dense is not None and embedder is not None:
        offtopic = closeness(embedder, task, dense)
    else:
        offtopic = lexical_closeness(task, prof.terms)
    ref = attrs.evolve(
        _pooled(mode, prof, found, dense=dense is not None),
        offtopic=offtopic,
        lexical_hits=found.hits,
        dense_hits=tuple(map(DenseRun.pack, found.nearest)),
        dense_complete=found.complete,
        depth=REFERENCE_DEPTH,
        lexical_depth=SHARED_DEPTH,
        names_nodes=names_nodes,
    )
    features = _gate.qpp_features(mode, task, prof, ref)
    return attrs.evolve(ref, qpp=_gate.qpp_probability(mode, features), qpp_features=features)


@attrs.frozen
class _Retrieved:
    """The turn's retrieval for a task: FTS matches and nearest vectors of each corpus, and
    the pool's members with their analysed terms and (dense modes) cosines."""

    hits: tuple[LexicalRun, ...]
    nearest: tuple[tuple[Hit, ...], ...]
    terms: dict[Key, Sequence[str]]
    cosines: dict[Key, float]
    complete: tuple[bool, ...] = ()
    """Per corpus, whether `nearest` holds its `REFERENCE_DEPTH` nearest (`Nearest.complete`)."""
    tops: tuple[float, ...] = ()
    mean: float = 0.0


def _retrieved(
    conn: Reader,
    ns_id: int,
    hits: tuple[LexicalRun, ...],
    *,
    dense: tuple[npt.NDArray[np.float32], VectorIndex] | None,
    texts: TextIndex | None = None,
) -> _Retrieved:
    """The turn's lexical matches (`hits`, `lexical_hits`) with one search of each corpus's
    vectors (`dense`: the query vector and the index); the nearest rows' terms from the text
    index when it is current (`texts`), else from the engine."""
    terms = _lexical_pool(hits)
    if dense is None:
        return _Retrieved(hits=hits, nearest=(), terms=terms, cosines={})
    query_vector, vindex = dense
    nearest, complete, tops, mean = _dense_pool(conn, ns_id, query_vector, vindex)
    cosines = {(c, h.rowid): h.cosine for c, corpus_hits in enumerate(nearest) for h in corpus_hits}
    wanted = [k for k in cosines if k not in terms]
    kept = None if texts is None else texts.indexed_terms(conn, ns_id, wanted)
    terms.update(conn.indexed_terms(ns_id, wanted) if kept is None else kept)
    lexical_only = [k for k in terms if k not in cosines]
    cosines.update(_stored_cosines(conn, ns_id, lexical_only, query_vector, vindex))
    return _Retrieved(
        hits=hits, nearest=nearest, terms=terms, cosines=cosines, complete=complete, tops=tops, mean=mean
    )


def _with_nodes(found: _Retrieved, nodes: dict[Key, tuple[list[str], float | None]]) -> _Retrieved:
    """The retrieval with the graph nodes the task names as pool members (their terms, and
    their cosines in dense modes). In a namespace without a stored vector (graph records only)
    the nodes' cosines are also its best and its background: without them the gate would read
    no dense evidence at all. Beside stored vectors the best cosines stay the corpora's (a
    node's short rendering, a bare name, must not set the gap every memory's band is read from)."""
    for key, (node_terms, _) in nodes.items():
        found.terms[key] = node_terms
    cosines = {key: cosine for key, (_, cosine) in nodes.items() if cosine is not None}
    found.cosines.update(cosines)
    if not cosines or found.tops:
        return found
    tops = sorted(cosines.values(), reverse=True)[: _gate.TOP_COSINES]
    return attrs.evolve(found, tops=tuple(tops), mean=float(np.mean(list(cosines.values()))))


def _pooled(mode: str, prof: QueryProfile, found: _Retrieved, *, dense: bool) -> Reference:
    """The namespace's best lexical evidence and cosines, and its candidates' base logits."""
    members = [k for k in found.terms if not dense or k in found.cosines]
    lexical = _batch.lexical_matrix(prof, [found.terms[k] for k in members])
    partial = Reference(
        best_bm25=float(lexical.bm25_norm.max(initial=0.0)),
        best_coverage=float(lexical.coverage.max(initial=0.0)),
        best_cosine=found.tops[0] if found.tops else None,
        top_cosines=found.tops,
        mean_cosine=found.mean,
    )
    cosines = np.array([found.cosines[k] for k in members], dtype=np.float64) if dense else None
    bases = _batch.base_probabilities(mode, prof, lexical, cosines, partial)
    pool = -np.sort(-_batch.logits(bases[bases > 0.0]))
    return attrs.evolve(partial, pool=tuple(pool.tolist()))


def _graph_nodes(
    conn: Reader,
    ns_id: int,
    task: str,
    query_vector: npt.NDArray[np.float32] | None,
    embedder: Embedder | None,
) -> dict[Key, tuple[list[str], float | None]]:
    """The graph nodes the task names, as pool members: terms, and the cosine in dense modes."""
    texts = mentioned_texts(conn, ns_id, task)
    vectors = embedder.embed(texts) if texts and query_vector is not None and embedder is not None else None
    return {
        (_GRAPH, i): (_analysis.terms(t), None if vectors is None else float(vectors[i] @ query_vector))
        for i, t in enumerate(texts)
    }


def lexical_hits(
    conn: Reader, ns_id: int, prof: QueryProfile, texts: TextIndex | None = None
) -> tuple[LexicalRun, ...]:
    """The task's `SHARED_DEPTH` best FTS matches of each corpus (indexed by corpus), with
    their analysed terms: the turn's one lexical retrieval, which the reference reads its pool
    from (the first `REFERENCE_DEPTH`) and the sources take their candidates from. From the
    store's in-memory index when it is current (`sources.storage._text_index`), else one FTS
    query a corpus: the same matches and ranks."""
    if not prof.present:
        return ()
    qterms = sorted(prof.present)
    found = None if texts is None else texts.top(conn, ns_id, qterms, SHARED_DEPTH)
    if found is not None:
        return tuple(found[corpus] for corpus in _CORPORA)
    return tuple(
        LexicalRun.pack(conn.lexical_candidates(ns_id, qterms, corpus=corpus, limit=SHARED_DEPTH))
        for corpus in _CORPORA
    )


def _lexical_pool(runs: tuple[LexicalRun, ...]) -> dict[Key, Sequence[str]]:
    """The namespace's best FTS matches over every corpus: (corpus, rowid) -> analysed terms.

    The best `REFERENCE_DEPTH` of all corpora are among the best `REFERENCE_DEPTH` of each;
    equal ranks keep the corpora's order.
    """
    if not runs:
        return {}
    ranks = np.concatenate([run.ranks for run in runs])
    corpus = np.repeat(np.arange(len(runs)), [len(run) for run in runs])
    at = np.concatenate([np.arange(len(run)) for run in runs])
    best = np.argsort(ranks, kind="stable")[:REFERENCE_DEPTH]
    return {
        (c, int(runs[c].rowids[i])): runs[c].terms[i]
        for c, i in zip(corpus[best].tolist(), at[best].tolist(), strict=True)
    }


def _dense_pool(
    conn: Reader, ns_id: int, query_vector: npt.NDArray[np.float32], vindex: VectorIndex
) -> tuple[tuple[tuple[Hit, ...], ...], tuple[bool, ...], tuple[float, ...], float]:
    """Nearest vectors of each corpus (indexed by corpus), whether each corpus's are complete,
    the namespace's best cosines, and its mean cosine."""
    found = vindex.nearest(conn, [Slot(ns_id, c) for c in _CORPORA], query_vector, REFERENCE_DEPTH)
    hits = tuple(part.hits for part in found)
    total, weighted = 0, 0.0
    for part in found:
        total, weighted = total + part.live, weighted + part.live * part.mean
    cosines = sorted((h.cosine for corpus_hits in hits for h in corpus_hits), reverse=True)
    complete = tuple(part.complete for part in found)
    return hits, complete, tuple(cosines[: _gate.TOP_COSINES]), (weighted / total if total else 0.0)


def _stored_cosines(
    conn: Reader,
    ns_id: int,
    keys: list[Key],
    query_vector: npt.NDArray[np.float32],
    vindex: VectorIndex,
) -> dict[Key, float]:
    """Cosines of lexical candidates with the query, from their stored vectors (none: absent)."""
    out: dict[Key, float] = {}
    for corpus in _CORPORA:
        rowids = [r for c, r in keys if c == corpus]
        if rowids:
            found = vindex.cosines(conn, Slot(ns_id, corpus), rowids, query_vector)
            out.update({(corpus, r): cosine for r, cosine in found.items()})
    return out


__all__ = ["REFERENCE_DEPTH", "SHARED_DEPTH", "compute_reference", "lexical_hits"]
