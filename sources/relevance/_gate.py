"""The two factors of the one calibrated score: the task's QPP gate and a memory's band.

A candidate's score is the calibrated probability of the event "this task can be served
from this namespace, and this memory is within the task's evidence band", factored as

    score = qpp(task, namespace) x band(memory | task)

- `qpp` (query-performance prediction, the seed's "calibrated QPP gate") is the
  probability that the namespace holds memory that serves the task. It is query-level:
  computed once per task and namespace from the namespace's best evidence for the task
  (the `Reference`: best cosines and their margins, the background cosine the best stands
  out from, best BM25 and coverage, the best memories' base relevance and the margin
  between the first two) and from the task's terms (how many are informative, and how much
  of their IDF mass the namespace holds). Fitted as a logistic on tasks answerable in their
  namespace against the same questions asked of another tenant and off-topic tasks of our
  own writing.
- `band` is the memory's standing in the task's evidence band: 1 for the namespace's best
  memory, lower as the memory falls behind it (its rank among the namespace's candidates,
  the gap of its base relevance to the best, and of its cosine). Fitted as the probability
  that the task's first evidence lies at or below the memory's standing (relative to the
  best's), raised to the mode's exponent at the namespace's size (`band_exponent`): the one
  that puts the floor's edge where the band holds the evidence of most answerable dev tasks
  within a ceiling on the memories a turn takes (docs/relevance.md); in a large namespace
  (a long conversation's size) times a decay with the rank past `RANK_KNEE` (`rank_decay`).

A memory's base relevance (the per-memory logistic of `sources.relevance._relevance`) orders the
namespace's candidates; it is not the score.
"""

from __future__ import annotations

import bisect
import functools
import math
import operator
import re
from typing import TYPE_CHECKING, Final

from sources.storage import _analysis

from . import _calibration_constants as constants
from ._relevance import PRIOR_DOCS, logistic

if TYPE_CHECKING:
    from ._relevance import QueryProfile, Reference

_SENTENCE: Final = re.compile(r"[.!?]+\s+")
_WORD: Final = re.compile(r"[^\W\d_][\w'\u2019-]*")
_FIRST_PERSON: Final = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|our|ours|us)\b", re.IGNORECASE
)
LOGIT_CLIP: Final = 1e-6
TOP_COSINES: Final = 5
"""How many of the namespace's best cosines the reference keeps."""
OFFTOPIC_KNEE: Final = 0.5
"""Closeness to the off-topic tasks beyond which the gate closes faster (a second, hinged
feature): no answerable dev question, LoCoMo or personal, comes closer than about 0.51, while
the held-out trivial tasks' median is 0.62. Linear alone, the penalty could not outweigh a
tiny store's weak but only match ("what time is it" against "my favourite time of year")."""


def logit(p: float) -> float:
    """log(p / (1 - p)), clipped away from 0 and 1."""
    q = min(max(p, LOGIT_CLIP), 1.0 - LOGIT_CLIP)
    return math.log(q / (1.0 - q))


def task_features(mode: str, task: str, profile: QueryProfile) -> tuple[float, ...]:
    """Features of the task against the namespace: presence of its terms, how many it has,
    whether it speaks of the user (the first person: what a personal memory serves), the
    namespace's size (the best of many candidates is high by chance alone: a best cosine
    means less in a large namespace than in a small one), and the names it asks about that
    the namespace never mentions (`absent_names`)."""
    first = 1.0 if _FIRST_PERSON.search(task) else 0.0
    return (
        profile.presence,
        math.log1p(len(profile.terms)),
        first,
        namespace_size(mode, profile),
        math.log1p(absent_names(task, profile)),
    )


def names(task: str) -> frozenset[str]:
    """The analysed terms of the task's capitalised words that do not begin a sentence (names of
    people, places, products, months): what a question asks about by name."""
    found: set[str] = set()
    for sentence in _SENTENCE.split(task):
        words = _WORD.findall(sentence)
        for word in words[1:]:
            if word[0].isupper() and len(word) > 1:
                found.update(_analysis.terms(word))
    return frozenset(found)


def absent_names(task: str, profile: QueryProfile) -> int:
    """How many of the task's names (`names`) occur nowhere in the namespace: a question about
    someone or something the namespace never mentions cannot be served from it."""
    return sum(1 for term in names(task) if term in profile.terms and term not in profile.present)


def namespace_size(mode: str, profile: QueryProfile) -> float:
    """log(documents + the pseudo-documents of the IDF prior): a brand-new namespace of a few
    memories reads like a small one, not like a size the fit never saw. In dense and hybrid
    modes a namespace larger than any the gate was fitted on reads as the largest
    (`QPP_SIZE_MAX`): the linear terms in the size, fitted on namespaces of at most about a
    thousand memories, closed the gate on most tasks of one a few times as large (the five dev
    conversations' 2,760 turns in one namespace served 74 % of their questions, and the first
    conversation's 65 %, against 100 % alone; `python -m benchmarks.gate_scale`). Lexical mode
    reads the size unclipped (`QPP_SIZE_MAX` None): clipped, it served more (81 -> 91 %) but
    abstained on 78 % of foreign tasks there instead of 92 %; in lexical mode bare word overlap
    grows with the namespace."""
    size = math.log(profile.n_docs + PRIOR_DOCS)
    top = constants.QPP_SIZE_MAX[mode]
    return size if top is None else min(size, top)


def _lexical_part(ref: Reference) -> tuple[float, ...]:
    first = ref.pool[0] if ref.pool else logit(0.0)
    second = ref.pool[1] if len(ref.pool) > 1 else logit(0.0)
    return (first, first - second, ref.best_bm25, ref.best_coverage)


def _lexical_only(ref: Reference) -> tuple[float, ...]:
    """Lexical mode: the best base logit, the best BM25, the off-topic overlap and its excess
    over `OFFTOPIC_KNEE` (a task most of whose terms are a small-talk task's, "tell me a joke",
    closes faster than one that shares a word with one: the fit serves literal matches, and a
    store may hold the very words of small talk).

    The margin over the second and the coverage, collinear with them, took weights of the wrong
    sign and closed the gate on a memory that stands far above the rest.
    """
    first = ref.pool[0] if ref.pool else logit(0.0)
    return (first, ref.best_bm25, ref.offtopic, max(0.0, ref.offtopic - OFFTOPIC_KNEE))


def _dense_part(mode: str, ref: Reference, profile: QueryProfile) -> tuple[float, ...]:
    tops = ref.top_cosines
    best = tops[0] if tops else 0.0
    second = tops[1] if len(tops) > 1 else best
    last = tops[-1] if tops else best
    return (
        best,
        best - second,
        best - last,
        best - ref.mean_cosine,
        ref.mean_cosine,
        best * profile.presence,
        best * namespace_size(mode, profile),
        ref.offtopic,
        max(0.0, ref.offtopic - OFFTOPIC_KNEE),
    )


def qpp_features(mode: str, task: str, profile: QueryProfile, ref: Reference) -> tuple[float, ...]:
    """The QPP features of a task in a namespace, in the order of the fitted weights."""
    own = task_features(mode, task, profile)
    if mode == "lexical":
        return (*own, *_lexical_only(ref))
    if mode == "dense":
        return (*own, ref.pool[0] if ref.pool else logit(0.0), *_dense_part(mode, ref, profile))
    return (*own, *_lexical_part(ref), *_dense_part(mode, ref, profile))


_QPP: Final = {
    "lexical": ("LEXICAL_QPP_WEIGHTS", "LEXICAL_QPP_BIAS"),
    "dense": ("DENSE_QPP_WEIGHTS", "DENSE_QPP_BIAS"),
    "hybrid": ("HYBRID_QPP_WEIGHTS", "HYBRID_QPP_BIAS"),
}
_BAND: Final = {
    "lexical": ("LEXICAL_BAND_WEIGHTS", "LEXICAL_BAND_BIAS"),
    "dense": ("DENSE_BAND_WEIGHTS", "DENSE_BAND_BIAS"),
    "hybrid": ("HYBRID_BAND_WEIGHTS", "HYBRID_BAND_BIAS"),
}


def _fitted(table: dict[str, tuple[str, str]], mode: str) -> tuple[tuple[float, ...], float]:
    weights, bias = table[mode]
    return getattr(constants, weights), getattr(constants, bias)


def fitted_band(mode: str) -> tuple[tuple[float, ...], float]:
    """The band logistic's weights and bias in `mode` (read when asked: the fit rewrites them)."""
    return _fitted(_BAND, mode)


def qpp_probability(mode: str, features: tuple[float, ...]) -> float:
    """The calibrated probability that the namespace holds memory that serves the task."""
    weights, bias = _fitted(_QPP, mode)
    return logistic(weights, bias, features)


RANK_TIE: Final = 1e-3
"""Base logits this close count as equal: the same text scored from a stored vector and from a
fresh embedding (float rounding of a batch) keeps its rank."""


def rank_of(base_logit: float, pool: tuple[float, ...]) -> int:
    """How many of the namespace's candidates (base logits, best first) stand clearly above this one."""
    # `pool` is descending; count the entries greater than base_logit by more than a tie
    # (a bisection over the negated pool, without building it for every memory).
    return bisect.bisect_left(pool, -(base_logit + RANK_TIE), key=operator.neg)


def band_size(profile: QueryProfile) -> float:
    """The namespace's size as the band reads it: log1p(documents / PRIOR_DOCS); 0 for an empty
    namespace, growing slowly with it (`band_exponent` reads it between two fitted sizes)."""
    return math.log1p(profile.n_docs / PRIOR_DOCS)


def band_features(mode: str, base_logit: float, cosine: float | None, ref: Reference) -> tuple[float, ...]:
    """A memory's standing against the namespace's best: log rank, base-relevance gap, cosine
    gap (every feature 0 for the best)."""
    rank = math.log1p(rank_of(base_logit, ref.pool))
    best = ref.pool[0] if ref.pool else base_logit
    gap = max(0.0, best - base_logit - RANK_TIE)
    if mode == "lexical":
        return (rank, gap)
    top = ref.top_cosines[0] if ref.top_cosines else (cosine or 0.0)
    behind = top - (cosine if cosine is not None else 0.0)
    cos_gap = behind if math.isnan(behind) else max(0.0, behind)  # NaN: no standing (band 0)
    if mode == "dense":  # the base is a function of the cosine: its gap says nothing more
        return (rank, cos_gap)
    return (rank, gap, cos_gap)


@functools.lru_cache(maxsize=16)
def band_at_best(weights: tuple[float, ...], bias: float) -> float:
    """The band logistic of the namespace's best memory (every feature 0), computed once per
    fitted model (keyed by its values: the fit rewrites them in process)."""
    return logistic(weights, bias, (0.0,) * len(weights))


def long_share(mode: str, size: float) -> float:
    """Where a namespace of `band_size` `size` stands between the small stores and the long
    conversations the band was fitted on: 0 up to the largest small store, 1 from the smallest
    long conversation, linear between (`BAND_EXPONENT_SIZES`)."""
    low, high = constants.BAND_EXPONENT_SIZES[mode]
    if size >= high:
        return 1.0
    return min(1.0, max(0.0, (size - low) / (high - low))) if high > low else 1.0


def band_exponent(mode: str, size: float) -> float:
    """The band's exponent in a namespace of `band_size` `size`: the fitted one of small stores
    up to the largest of them, of long conversations from the smallest of them, linear between
    (`long_share`). How far behind the best a task's evidence lies, and how many memories a turn
    may take, differ between a small store and a long conversation: one band shape, two widths
    (`BAND_EXPONENTS`)."""
    small, large = constants.BAND_EXPONENTS[mode]
    return small + long_share(mode, size) * (large - small)


RANK_KNEE: Final = 8
"""How many of the namespace's candidates stand above a memory before the band's rank decay
(`rank_decay`) begins."""
RANK_DECAY: Final = 1.0
"""The rank decay's slope in a long conversation: past `RANK_KNEE`, the band falls as
((1 + RANK_KNEE) / (1 + rank)) to this power (`decay_slope`)."""
KNEE_LOG: Final = math.log1p(RANK_KNEE)
"""log1p(RANK_KNEE): the band's rank feature where the decay begins."""


def decay_slope(mode: str, size: float) -> float:
    """The rank decay's slope in a namespace of `band_size` `size`: `RANK_DECAY` in a long
    conversation, none in a small store (a few dozen facts, where the eighth candidate is most
    of the store), linear between (`long_share`)."""
    return RANK_DECAY * long_share(mode, size)


def rank_decay(log_rank: float, slope: float) -> float:
    """The band's factor for a memory's rank (`log1p(rank)`, the band's first feature): 1 up
    to `RANK_KNEE` candidates above it, falling as ((1 + RANK_KNEE) / (1 + rank)) ** `slope`
    past them (`decay_slope`).

    The fitted band reads how likely the task's first evidence still lies at or below a
    memory; on a hard task in a long conversation (hundreds of turns, many alike) that stays
    high far down the ranking, so the floor spent a turn's memories where each adds least.
    Decaying past the knee moves them to the tasks whose band is steep: on the LoCoMo dev
    conversations, the exponent refitted to the same 10 memories per question, the evidence
    kept rose from 0.76 to 0.80 on each conversation left out of the choice, in a one-off
    simulation from the floor-0 scores (knee 6-10 and slope 0.5-2 all gave 0.797-0.803; the
    middle was taken). Through the judged harness the gain is smaller (docs/relevance.md)."""
    return math.exp(-slope * max(0.0, log_rank - KNEE_LOG))


def band_probability(mode: str, features: tuple[float, ...], size: float) -> float:
    """The memory's standing in the task's evidence band: 1 for the namespace's best, lower
    behind it (the fitted probability relative to the best's, raised to the exponent of the
    mode at the namespace's `band_size`, times the `rank_decay` of its rank)."""
    weights, bias = fitted_band(mode)
    at_best = band_at_best(weights, bias)
    raw = logistic(weights, bias, features) / at_best
    if math.isnan(raw):  # a NaN feature (a NaN cosine): no standing, never the band's top
        return 0.0
    decay = rank_decay(features[0], decay_slope(mode, size))
    return float(min(1.0, raw) ** band_exponent(mode, size) * decay)
