"""The one calibrated relevance scale: evidence mapped to a probability of relevance.

Features of (query, memory text, namespace term statistics, and in dense modes the two
vectors) go through a fitted logistic model.

Every source that scores text similarity uses a `Scorer` built once per request, so an
equally relevant memory gets the same score whichever source returns it, in every mode.

What each mode sees (the logistic of each is fitted by benchmarks/fit_calibration.py, same
labels, leave-one-conversation-out):
- lexical: the six `LexicalFeatures`; zero without a matched informative term.
- dense: the cosine of the query and memory vectors, and query-level features only: the
  cosine weighted by `presence` (share of the query's IDF mass present in the namespace;
  names and topics absent from a tenant are the signal that rejects foreign questions),
  `presence`, and log1p of the number of informative query terms.
- hybrid: the eight lexical features (computed for every candidate, their zero form when no
  term overlaps) plus the two cosine features of dense mode.

Dense and hybrid modes also see where the memory stands against the namespace's best
evidence for the query (a `Reference`, computed once per query and namespace over every
corpus the namespace holds, so it is the same whichever source scores a text): whether its
cosine is the namespace's best, and in hybrid whether its BM25 is, and its shortfall in
BM25 and IDF coverage from the best. (Lexical mode gained nothing measurable from them on
the dev data, so it stays as it was and computes no reference: the mode for speed.) On LoCoMo the
namespace's best match is gold evidence far more often than its raw similarity says, and
a foreign question has no such standout: these features cut false abstention by a quarter
in hybrid mode at unchanged trivial and foreign abstention (see benchmarks/fit_calibration.py).
In every mode a query with no informative term (only stop words and punctuation) scores 0:
a cosine is never zero, so this is what keeps "thanks!" from recalling anything.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Final

import attrs

from broker import RECALL_MODES, FieldError, ValidationError
from sources.storage import _analysis
from sources.storage._runs import DenseRun, LexicalRun

from . import _calibration_constants as constants

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from sources.storage._engine import Reader
    from sources.storage._text_index import TextIndex


MODES: Final = RECALL_MODES
"""Recall modes; the floor means the same probability in each."""
DENSE_MODES: Final = frozenset({"dense", "hybrid"})

K1 = 1.2
B = 0.75


PRIOR_DOCS = 100
"""Pseudo-documents (sharing none of the query's terms) added to every namespace's term
statistics: a prior that keeps IDF meaningful in a namespace of a handful of memories, where
every term would otherwise look common. Large namespaces barely notice it."""


def idf(n_docs: int, df: int) -> float:
    """Positive BM25 IDF (the +1 form) under the pseudo-document prior; an unseen term gets
    the largest value."""
    n = n_docs + PRIOR_DOCS
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@attrs.frozen(kw_only=True)
class QueryProfile:
    """A query's informative terms with their per-namespace statistics.

    `mass` (total IDF of the terms), `presence` (share of that mass whose terms occur in the
    namespace at all) and `max_idf` (the IDF of an unseen term: the scale of specificity)
    are computed once, since every candidate of the turn is scored against them.
    """

    terms: tuple[str, ...]
    idf: Mapping[str, float]
    present: frozenset[str]
    avgdl: float
    n_docs: int = 0
    generation: int = 0
    """The namespace's write generation the statistics were read at (caches key on it)."""
    mass: float = attrs.field(init=False)
    presence: float = attrs.field(init=False)
    max_idf: float = attrs.field(init=False)
    rarest: str | None = attrs.field(init=False)
    """The query's rarest term present in the namespace (None: no term is present)."""

    def __attrs_post_init__(self) -> None:
        mass = sum(self.idf.values())
        present = sum(self.idf[t] for t in self.present)
        object.__setattr__(self, "mass", mass)
        object.__setattr__(self, "presence", present / mass if mass else 0.0)
        object.__setattr__(self, "max_idf", idf(self.n_docs, 0))
        in_namespace = [t for t in self.terms if t in self.present]
        rarest = max(in_namespace, key=lambda t: self.idf[t]) if in_namespace else None
        object.__setattr__(self, "rarest", rarest)

    @classmethod
    def build(
        cls,
        terms: Sequence[str],
        *,
        n_docs: int,
        total_len: int,
        df: Mapping[str, int],
        generation: int = 0,
    ) -> QueryProfile:
        """Profile a query against one namespace's statistics."""
        uniq = tuple(dict.fromkeys(terms))
        return cls(
            terms=uniq,
            idf={t: idf(n_docs, df.get(t, 0)) for t in uniq},
            present=frozenset(t for t in uniq if df.get(t, 0) > 0),
            avgdl=(total_len / n_docs) if n_docs else 1.0,
            n_docs=n_docs,
            generation=generation,
        )


TIE: Final = 1e-5
"""Tolerance of "equals the namespace's best" (float rounding of one dot product)."""


@attrs.frozen(kw_only=True)
class Reference:
    """The namespace's best evidence for one query, over every corpus it holds.

    `best_bm25` and `best_coverage` are the largest `bm25_norm` and `coverage` among the
    namespace's candidates; `best_cosine` is the largest cosine of the query with any
    current stored vector of the namespace (None without any, or in lexical mode), and
    `top_cosines` the best few, best first; `mean_cosine` is the query's mean cosine over
    the namespace (the background the best stands out from). `pool` holds the base
    relevance logits of the namespace's candidates, best first: a memory's rank among them
    is its standing. `qpp` is the task's gate (`sources.relevance._gate`), computed from the rest;
    `qpp_features` are kept for the trace-free explanation and the fit.
    """

    best_bm25: float = 0.0
    best_coverage: float = 0.0
    best_cosine: float | None = None
    top_cosines: tuple[float, ...] = ()
    mean_cosine: float = 0.0
    pool: tuple[float, ...] = ()
    offtopic: float = 0.0
    """The task's closeness to tasks no memory serves (`sources.relevance._offtopic`)."""
    qpp: float = 0.0
    qpp_features: tuple[float, ...] = ()
    lexical_hits: tuple[LexicalRun, ...] = ()
    """The task's best FTS matches of each corpus (indexed by corpus number), best first,
    `lexical_depth` deep: the turn's one lexical retrieval, which the sources share
    (empty when the reference ran none: dense mode, or no term of the task in the namespace)."""
    dense_hits: tuple[DenseRun, ...] = ()
    """The task's nearest vectors of each corpus (indexed by corpus number), best first,
    `REFERENCE_DEPTH` deep: the turn's one dense retrieval (empty in lexical mode)."""
    dense_complete: tuple[bool, ...] = ()
    """Per corpus, whether `dense_hits` holds its `depth` nearest (or all its rows). A corpus
    searched in one walk of its namespace's graph keeps only its rows among the namespace's
    nearest (`VectorIndex.nearest`): when those are fewer, they are still its nearest, but
    no deeper run is (empty: every run is complete)."""
    depth: int = 0
    """How deep the reference read each corpus (its pool: the first this many of `lexical_hits`,
    and `dense_hits`)."""
    lexical_depth: int = 0
    """How deep `lexical_hits` were retrieved per corpus."""
    names_nodes: bool = False
    """Whether the task names a graph node of the namespace: the graph source then reads on
    its own evidence when the gate is closed (`sources._graphs.GraphSource`)."""

    def hits(self, corpus: int, depth: int) -> LexicalRun | None:
        """The best `depth` FTS matches of one corpus, or None if the retrieval did not go that
        deep (the source then searches itself); a corpus with fewer matches than were asked
        for has given them all."""
        if corpus >= len(self.lexical_hits):
            return None
        run = self.lexical_hits[corpus]
        if depth > self.lexical_depth and len(run) >= self.lexical_depth:
            return None
        return run.head(depth)

    def nearest(self, corpus: int, depth: int) -> DenseRun | None:
        """The `depth` nearest vectors of one corpus, or None if the reference has not
        retrieved that deep (the source then searches itself): beyond its `depth`, or beyond
        the rows it has of a corpus whose run is not complete (`dense_complete`)."""
        if corpus >= len(self.dense_hits) or depth > self.depth:
            return None
        run = self.dense_hits[corpus]
        short = corpus < len(self.dense_complete) and not self.dense_complete[corpus]
        return None if short and len(run) < depth else run.head(depth)


NO_REFERENCE: Final = Reference()
"""An empty namespace's reference: nothing in it can serve a task (qpp 0)."""


def lexical_relative(features: LexicalFeatures, ref: Reference) -> tuple[float, float, float]:
    """(standing, BM25 shortfall, coverage shortfall) against the namespace's best.

    Standing is the query's presence when the text has the namespace's best BM25, else 0:
    standing out counts as much as the namespace knows the query's terms (a foreign
    question's best match stands out among texts that lack its names). Gaps are <= 0.
    """
    best = features.presence if features.matched and features.bm25_norm >= ref.best_bm25 - TIE else 0.0
    return (
        best,
        min(0.0, features.bm25_norm - ref.best_bm25),
        min(0.0, features.coverage - ref.best_coverage),
    )


def dense_relative(cosine: float, ref: Reference, presence: float) -> float:
    """Standing of a cosine: the query's presence when it is the namespace's best cosine, else
    0. A namespace without current vectors (written before an embedder, or stale until
    `reindex`) singles out no text: its cosines are computed on the fly, and the fit never
    saw such a namespace."""
    if ref.best_cosine is None:
        return 0.0
    return presence if cosine >= ref.best_cosine - TIE else 0.0


@attrs.frozen(kw_only=True)
class LexicalFeatures:
    """Query-normalised lexical evidence for one memory."""

    coverage: float
    bm25_norm: float
    matched: int
    unmatched: int
    presence: float
    rarest_hit: float
    specificity: float = 0.0
    peak_specificity: float = 0.0

    def vector(self) -> tuple[float, ...]:
        """Return the feature vector in the order of the fitted weights."""
        return (
            self.coverage,
            self.bm25_norm,
            math.log1p(self.matched),
            math.log1p(self.unmatched),
            self.presence,
            self.rarest_hit,
            self.specificity,
            self.peak_specificity,
        )


def lexical_features(profile: QueryProfile, doc_terms: Sequence[str]) -> LexicalFeatures:
    """Features of one memory (its analysed terms) against a profiled query."""
    mass = profile.mass
    if not profile.terms or mass <= 0.0:
        return LexicalFeatures(
            coverage=0.0, bm25_norm=0.0, matched=0, unmatched=0, presence=0.0, rarest_hit=0.0
        )
    # Count only the query's terms in the text (C-level counts; no Counter of every term).
    tf = {t: n for t in profile.terms if (n := doc_terms.count(t))}
    if not tf:  # the common dense candidate: no overlap
        return LexicalFeatures(
            coverage=0.0,
            bm25_norm=0.0,
            matched=0,
            unmatched=len(profile.terms),
            presence=profile.presence,
            rarest_hit=0.0,
        )
    norm = K1 * (1.0 - B + B * len(doc_terms) / max(profile.avgdl, 1e-9))
    # `tf` holds the matched terms in query order (it was built iterating the query's terms).
    weights = profile.idf
    covered = sum(weights[t] for t in tf)
    bm25 = sum(weights[t] * n * (K1 + 1.0) / (n + norm) for t, n in tf.items())
    # Specificity: matched IDF on the namespace's own scale (1 = a term no other memory
    # has), so evidence means the same in a small store and a large one.
    scale = max(profile.max_idf, 1e-9)
    specific = [weights[t] / scale for t in tf]
    return LexicalFeatures(
        coverage=covered / mass,
        bm25_norm=bm25 / (mass * (K1 + 1.0)),
        matched=len(tf),
        unmatched=len(profile.terms) - len(tf),
        presence=profile.presence,
        rarest_hit=1.0 if profile.rarest is not None and profile.rarest in tf else 0.0,
        specificity=sum(specific),
        peak_specificity=max(specific),
    )


def logistic(weights: Sequence[float], bias: float, x: Sequence[float]) -> float:
    """sigmoid(w . x + b), numerically safe."""
    if len(weights) != len(x):
        msg = f"{len(x)} features for {len(weights)} weights"
        raise ValueError(msg)
    z = bias + sum(map(operator.mul, weights, x))
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def lexical_probability(features: LexicalFeatures) -> float:
    """Calibrated probability of relevance from lexical evidence alone."""
    if features.matched == 0:
        return 0.0
    return logistic(constants.LEXICAL_WEIGHTS, constants.LEXICAL_BIAS, features.vector())


def check_mode(mode: object) -> str:
    """Return the mode if known; raise ValidationError otherwise."""
    if mode not in MODES:
        raise ValidationError(
            [
                FieldError(
                    field="mode", code="invalid_choice", message=f"mode must be one of {', '.join(MODES)}"
                )
            ]
        )
    return str(mode)


def dense_features(profile: QueryProfile, cosine: float, ref: Reference) -> tuple[float, ...]:
    """Dense-mode features: the cosine, query-level evidence, and whether it is the best cosine."""
    presence = profile.presence
    return (
        cosine,
        cosine * presence,
        presence,
        math.log1p(len(profile.terms)),
        dense_relative(cosine, ref, presence),
    )


def dense_probability(profile: QueryProfile, cosine: float, ref: Reference) -> float:
    """Calibrated probability of relevance from the cosine (and the query's profile)."""
    if not profile.terms:
        return 0.0
    return logistic(constants.DENSE_WEIGHTS, constants.DENSE_BIAS, dense_features(profile, cosine, ref))


def hybrid_features(
    profile: QueryProfile, lexical: LexicalFeatures, cosine: float, ref: Reference
) -> tuple[float, ...]:
    """Hybrid features: the lexical ones, the cosine and the cosine weighted by presence, then
    the four relative to `ref` (best cosine, best BM25, BM25 and coverage shortfalls)."""
    return (
        *lexical.vector(),
        cosine,
        cosine * profile.presence,
        dense_relative(cosine, ref, profile.presence),
        *lexical_relative(lexical, ref),
    )


def hybrid_probability(
    profile: QueryProfile, lexical: LexicalFeatures, cosine: float, ref: Reference
) -> float:
    """Calibrated probability of relevance from lexical and dense evidence together."""
    if not profile.terms:
        return 0.0
    return logistic(
        constants.HYBRID_WEIGHTS, constants.HYBRID_BIAS, hybrid_features(profile, lexical, cosine, ref)
    )


def profile(reader: Reader, ns_id: int | None, query: str, texts: TextIndex | None = None) -> QueryProfile:
    """Profile a query against a namespace's statistics (empty namespace: no statistics); the
    terms' document frequencies from the in-memory text index when it is current (`texts`),
    the same counts the engine keeps."""
    qterms = _analysis.query_terms(query)
    if ns_id is None or not qterms:
        return QueryProfile.build(qterms, n_docs=0, total_len=0, df={})
    df = None if texts is None else texts.document_frequencies(reader, ns_id, qterms)
    stats = reader.term_stats(ns_id, qterms if df is None else ())
    return QueryProfile.build(
        qterms,
        n_docs=stats.n_docs,
        total_len=stats.total_len,
        df=stats.df if df is None else df,
        generation=stats.generation,
    )
