"""The two factors of the one score: the task's gate (qpp) and a memory's band."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sources.relevance import _batch, _gate, _relevance
from sources.relevance import _calibration_constants as constants
from sources.relevance._relevance import MODES, QueryProfile, Reference
from sources.storage import _analysis

logits = st.floats(min_value=-14.0, max_value=14.0, allow_nan=False)
pools = st.lists(logits, min_size=1, max_size=60).map(lambda xs: tuple(sorted(xs, reverse=True)))
cosines = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
modes = st.sampled_from(MODES)
sizes = st.floats(min_value=0.0, max_value=5.0)


def _ref(pool: tuple[float, ...], top: float = 0.6) -> Reference:
    return Reference(pool=pool, top_cosines=(top, top - 0.05, top - 0.1), mean_cosine=0.1, qpp=0.9)


@given(pool=pools, base=logits)
def test_rank_counts_the_candidates_clearly_above(pool: tuple[float, ...], base: float) -> None:
    """A memory's rank is how many of the namespace's candidates stand above it by more than a tie."""
    assert _gate.rank_of(base, pool) == sum(1 for v in pool if v > base + _gate.RANK_TIE)


@given(mode=modes, pool=pools, cosine=cosines, size=sizes)
def test_the_best_memory_has_the_whole_band(
    mode: str, pool: tuple[float, ...], cosine: float, size: float
) -> None:
    """At the namespace's best base relevance and best cosine the band is exactly 1, at any size."""
    ref = _ref(pool, top=cosine)
    band = _gate.band_probability(mode, _gate.band_features(mode, pool[0], cosine, ref), size)
    assert band == 1.0


@given(mode=modes, pool=pools, pair=st.tuples(logits, logits), cosine=cosines, size=sizes)
def test_band_never_rises_as_a_memory_falls_behind(
    mode: str, pool: tuple[float, ...], pair: tuple[float, float], cosine: float, size: float
) -> None:
    """Of two memories with the same cosine, the one with the lower base relevance has no larger
    band, in a namespace of any size."""
    low, high = sorted(pair)
    ref = _ref(pool)
    band_low = _gate.band_probability(mode, _gate.band_features(mode, low, cosine, ref), size)
    band_high = _gate.band_probability(mode, _gate.band_features(mode, high, cosine, ref), size)
    assert 0.0 <= band_low <= band_high + 1e-12 <= 1.0 + 1e-12


@given(mode=modes, pool=pools, base=logits, pair=st.tuples(cosines, cosines), size=sizes)
def test_band_never_rises_as_the_cosine_falls(
    mode: str, pool: tuple[float, ...], base: float, pair: tuple[float, float], size: float
) -> None:
    """Of two memories with the same base relevance, the one further from the best cosine has no
    larger band, at any size."""
    low, high = sorted(pair)
    ref = _ref(pool, top=1.0)
    band_low = _gate.band_probability(mode, _gate.band_features(mode, base, low, ref), size)
    band_high = _gate.band_probability(mode, _gate.band_features(mode, base, high, ref), size)
    assert band_low <= band_high + 1e-12


@given(
    mode=modes,
    pool=pools,
    presence=st.floats(min_value=0.0, max_value=1.0),
    n_terms=st.integers(min_value=1, max_value=12),
)
def test_the_gate_is_a_probability(mode: str, pool: tuple[float, ...], presence: float, n_terms: int) -> None:
    """Whatever the task and the namespace's evidence, qpp is a probability and its features are finite."""
    terms = tuple(f"t{i}" for i in range(n_terms))
    present = frozenset(terms[: round(presence * n_terms)])
    prof = QueryProfile(terms=terms, idf=dict.fromkeys(terms, 2.0), present=present, avgdl=10.0, n_docs=500)
    features = _gate.qpp_features(mode, "what do I need to know?", prof, _ref(pool))
    assert all(math.isfinite(f) for f in features)
    assert 0.0 <= _gate.qpp_probability(mode, features) <= 1.0


def test_names_are_capitalised_words_that_do_not_begin_a_sentence() -> None:
    """Names are read mid-sentence, possessives folded; question words and sentence starts are not names."""
    task = "What did I tell Mia's teacher about the Pacific Northwest trip? And when is Max's birthday"
    assert _gate.names(task) == {"mia", "pacif", "northwest", "max"}
    assert _gate.names("what time is it") == frozenset()
    assert _gate.names("When did I last call the dentist?") == frozenset()


def test_absent_names_counts_only_names_the_namespace_never_mentions() -> None:
    """A name the namespace holds is not absent; an unknown one is, and ordinary words never count."""
    task = "What did Melanie and Mia bring to the picnic?"
    terms = ("melani", "mia", "bring", "picnic")
    prof = QueryProfile(
        terms=terms, idf=dict.fromkeys(terms, 2.0), present=frozenset({"mia"}), avgdl=10.0, n_docs=500
    )
    assert _gate.absent_names(task, prof) == 1


@given(task=st.text(max_size=80))
def test_absent_names_never_exceeds_the_tasks_names(task: str) -> None:
    """Whatever the text, the count is between 0 and the number of the task's names."""
    terms = tuple(dict.fromkeys(_analysis.terms(task)))
    prof = QueryProfile(terms=terms, idf=dict.fromkeys(terms, 2.0), present=frozenset(), avgdl=10.0, n_docs=5)
    assert 0 <= _gate.absent_names(task, prof) <= len(_gate.names(task))


@given(mode=modes, pool=pools, base=logits, cosine=cosines, qpp=st.floats(min_value=0.0, max_value=1.0))
def test_a_score_never_exceeds_the_gate(
    mode: str, pool: tuple[float, ...], base: float, cosine: float, qpp: float
) -> None:
    """A score (qpp x band) never exceeds qpp: below the floor's gate nothing can clear the floor."""
    band = _gate.band_probability(mode, _gate.band_features(mode, base, cosine, _ref(pool)), 0.0)
    assert 0.0 <= band <= 1.0
    assert qpp * band <= qpp


def _sized(n_docs: int) -> float:
    return _gate.band_size(QueryProfile(terms=(), idf={}, present=frozenset(), avgdl=1.0, n_docs=n_docs))


def test_band_size_grows_with_the_namespace() -> None:
    """An empty namespace has size 0, a larger one a larger size."""
    assert _sized(0) == 0.0
    assert 0.0 < _sized(50) < _sized(600) < _sized(100_000)


@given(mode=modes, a=sizes, b=sizes)
def test_the_band_exponent_lies_between_the_fitted_two(mode: str, a: float, b: float) -> None:
    """The exponent is the small stores' one up to their size, the long conversations' from theirs,
    and moves one way only between them."""
    small, large = constants.BAND_EXPONENTS[mode]
    low, high = constants.BAND_EXPONENT_SIZES[mode]
    assert _gate.band_exponent(mode, min(low, a)) == pytest.approx(small)
    assert _gate.band_exponent(mode, max(high, a)) == pytest.approx(large)
    lo, hi = sorted((a, b))
    step = _gate.band_exponent(mode, hi) - _gate.band_exponent(mode, lo)
    assert step * (large - small) >= -1e-12


@given(rank=st.integers(min_value=0, max_value=10_000), slope=st.floats(min_value=0.0, max_value=3.0))
def test_the_band_decays_with_the_rank_past_the_knee_only(rank: int, slope: float) -> None:
    """Up to RANK_KNEE candidates above it a memory keeps its band; past them it is multiplied
    by ((1 + knee) / (1 + rank)) ** slope, in the scalar and the array form alike."""
    knee = _gate.RANK_KNEE
    want = 1.0 if rank <= knee else ((1 + knee) / (1 + rank)) ** slope
    decay = _gate.rank_decay(math.log1p(rank), slope)
    assert decay == pytest.approx(want)
    assert _batch.rank_decays(np.log1p(np.array([rank], dtype=np.float64)), slope)[0] == pytest.approx(decay)


@given(mode=modes, size=sizes)
def test_the_rank_decay_is_a_long_conversations_trait(mode: str, size: float) -> None:
    """No decay up to the largest small store fitted, the whole RANK_DECAY from the smallest
    long conversation, and never less in a larger namespace."""
    low, high = constants.BAND_EXPONENT_SIZES[mode]
    slope = _gate.decay_slope(mode, size)
    assert 0.0 <= slope <= _gate.RANK_DECAY
    assert _gate.decay_slope(mode, low) == 0.0
    assert _gate.decay_slope(mode, high) == _gate.RANK_DECAY
    assert _gate.decay_slope(mode, size + 0.5) >= slope


@given(mode=modes)
def test_a_memory_as_good_as_the_best_but_far_down_a_long_conversation_keeps_only_the_decay(
    mode: str,
) -> None:
    """With no gap to the best but 99 candidates above it, the band of a long conversation is
    at most the rank's decay."""
    size = constants.BAND_EXPONENT_SIZES[mode][1]
    ref = _ref(tuple([1.0] * 99 + [1.0 - 2 * _gate.RANK_TIE]), top=0.6)
    band = _gate.band_probability(mode, _gate.band_features(mode, 1.0 - 2 * _gate.RANK_TIE, 0.6, ref), size)
    assert 0.0 < band <= _gate.rank_decay(math.log1p(99), _gate.RANK_DECAY) + 1e-12


@given(mode=modes, n_docs=st.integers(min_value=0, max_value=10**7))
def test_a_namespace_larger_than_any_fitted_reads_as_the_largest(mode: str, n_docs: int) -> None:
    """In dense and hybrid modes the gate's size never exceeds the largest fitted namespace's and
    grows with the namespace up to it (a store ten times the dev conversations' size is not read
    as evidence against every task); lexical mode reads it unclipped."""
    prof = QueryProfile(terms=(), idf={}, present=frozenset(), avgdl=1.0, n_docs=n_docs)
    size, whole = _gate.namespace_size(mode, prof), math.log(n_docs + _relevance.PRIOR_DOCS)
    top = constants.QPP_SIZE_MAX[mode]
    assert (top is None) == (mode == "lexical")
    assert size == (whole if top is None else min(whole, top))
