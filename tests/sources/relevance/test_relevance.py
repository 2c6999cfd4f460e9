"""Tests of the calibrated scale's pure parts: the features relative to the namespace's best."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sources.relevance import _calibration_constants as constants
from sources.relevance._relevance import (
    K1,
    B,
    LexicalFeatures,
    QueryProfile,
    Reference,
    dense_probability,
    dense_relative,
    hybrid_probability,
    lexical_features,
    lexical_relative,
)

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
cosines = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
PROFILE = QueryProfile.build(
    ["caroline", "support", "group"], n_docs=500, total_len=6000, df={"caroline": 40}
)


def features(bm25: float, coverage: float, matched: int = 2) -> LexicalFeatures:
    return LexicalFeatures(
        coverage=coverage,
        bm25_norm=bm25,
        matched=matched,
        unmatched=3 - matched,
        presence=0.4,
        rarest_hit=1.0,
    )


@given(bm25=unit, coverage=unit, best_bm25=unit, best_coverage=unit)
def test_lexical_shortfalls_are_never_positive(
    bm25: float, coverage: float, best_bm25: float, best_coverage: float
) -> None:
    """Shortfalls from the namespace's best are <= 0; a text reaching the best stands at the query's presence."""
    ref = Reference(best_bm25=best_bm25, best_coverage=best_coverage)
    standing, bm25_gap, coverage_gap = lexical_relative(features(bm25, coverage), ref)
    assert bm25_gap <= 0.0
    assert coverage_gap <= 0.0
    assert standing == (0.4 if bm25 >= best_bm25 - 1e-5 else 0.0)


def test_a_text_without_a_matched_term_is_never_the_best() -> None:
    """No matched term means no lexical standing, even against an empty reference."""
    assert lexical_relative(features(0.0, 0.0, matched=0), Reference())[0] == 0.0


@given(cosine=cosines, best=cosines, presence=unit)
def test_best_cosine_standing(cosine: float, best: float, presence: float) -> None:
    """A cosine stands at the query's presence exactly when it reaches the namespace's best, else 0."""
    expected = presence if cosine >= best - 1e-5 else 0.0
    assert dense_relative(cosine, Reference(best_cosine=best), presence) == expected


@given(cosine=cosines, presence=unit)
def test_a_namespace_without_vectors_singles_out_no_text(cosine: float, presence: float) -> None:
    """Without current stored vectors no cosine stands out (texts are embedded on the fly)."""
    assert dense_relative(cosine, Reference(best_cosine=None), presence) == 0.0


@given(cosine=cosines)
def test_being_the_namespace_best_match_never_lowers_a_score(cosine: float) -> None:
    """The fitted models reward the namespace's best cosine: it scores at least as high as a runner-up."""
    best = Reference(best_cosine=cosine)
    runner_up = Reference(best_cosine=min(1.0, cosine + 0.2))
    if cosine + 0.2 > 1.0:
        return
    assert dense_probability(PROFILE, cosine, best) >= dense_probability(PROFILE, cosine, runner_up)
    lex = features(0.3, 0.4)
    ref_best = Reference(best_bm25=0.3, best_coverage=0.4, best_cosine=cosine)
    ref_runner = Reference(best_bm25=0.3, best_coverage=0.4, best_cosine=cosine + 0.2)
    assert hybrid_probability(PROFILE, lex, cosine, ref_best) >= hybrid_probability(
        PROFILE, lex, cosine, ref_runner
    )


def test_constants_match_the_feature_vectors() -> None:
    """Each mode's fitted weights have one entry per feature the scorer computes."""
    ref = Reference(best_bm25=0.5, best_coverage=0.5, best_cosine=0.5)
    lex = features(0.3, 0.4)
    assert len(constants.DENSE_WEIGHTS) == 5
    assert len(constants.LEXICAL_WEIGHTS) == len(lex.vector())
    assert len(constants.HYBRID_WEIGHTS) == len(lex.vector()) + 3 + len(lexical_relative(lex, ref))


WORDS = st.sampled_from(["caroline", "support", "group", "pottery", "class", "june", "wedding"])


def counted_features(profile: QueryProfile, doc: list[str]) -> tuple[float, ...]:
    """The lexical features written out from a full term count (the plain formula)."""
    tf = Counter(doc)
    norm = K1 * (1.0 - B + B * len(doc) / profile.avgdl)
    matched = [t for t in profile.terms if tf[t]]
    bm25 = sum(profile.idf[t] * tf[t] * (K1 + 1.0) / (tf[t] + norm) for t in matched)
    rarest = max(profile.present, key=lambda t: profile.idf[t])
    return (
        sum(profile.idf[t] for t in matched) / profile.mass,
        bm25 / (profile.mass * (K1 + 1.0)),
        len(matched),
        len(profile.terms) - len(matched),
        1.0 if tf[rarest] else 0.0,
    )


@given(doc=st.lists(WORDS, max_size=40))
def test_lexical_features_follow_the_bm25_formula(doc: list[str]) -> None:
    """Features counted from the query's terms alone equal the formula over a full term count."""
    f = lexical_features(PROFILE, doc)
    got = (f.coverage, f.bm25_norm, f.matched, f.unmatched, f.rarest_hit)
    assert got == pytest.approx(counted_features(PROFILE, doc), rel=1e-12, abs=1e-15)
