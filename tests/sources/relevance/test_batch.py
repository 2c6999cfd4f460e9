"""Tests of the scale over arrays: every column equals the scalar definition of `_relevance` and `_gate`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sources.relevance import _batch, _gate
from sources.relevance._relevance import (
    QueryProfile,
    Reference,
    dense_probability,
    hybrid_probability,
    lexical_features,
    lexical_probability,
)
from sources.relevance._scorer import Scorer
from sources.storage._doc_terms import IndexedTerms, shared_vocab

WORDS = ["caroline", "support", "group", "lgbtq", "paint", "lake", "sunrise", "a", "b", "c"]
word = st.sampled_from(WORDS)
text = st.lists(word, max_size=30)
query = st.lists(word, min_size=1, max_size=12)
cosine = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
# Up to past n_docs + the prior (600): a term's IDF is then negative, as when statistics lag.
dfs = st.dictionaries(word, st.integers(min_value=0, max_value=700))
pools = st.lists(st.floats(min_value=-14.0, max_value=14.0, allow_nan=False), max_size=8)
# Deep enough that a text may stand past the band's rank decay (`_gate.RANK_KNEE`).
deep_pools = st.lists(st.floats(min_value=-14.0, max_value=14.0, allow_nan=False), max_size=60)
MODES = ["lexical", "dense", "hybrid"]


def _profile(terms: list[str], df: dict[str, int]) -> QueryProfile:
    return QueryProfile.build(terms, n_docs=500, total_len=6000, df=df)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=200)
@given(terms=query, df=dfs, docs=st.lists(text, max_size=6))
def test_the_lexical_matrix_holds_each_texts_scalar_features(
    terms: list[str], df: dict[str, int], docs: list[list[str]]
) -> None:
    """Row i of the matrix is `lexical_features` of text i, whatever else is in the batch."""
    prof = _profile(terms, df)
    matrix = _batch.lexical_matrix(prof, docs)
    assert matrix.x.shape == (len(docs), 8)
    for i, doc in enumerate(docs):
        scalar = lexical_features(prof, doc)
        assert int(matrix.matched[i]) == scalar.matched
        assert all(_close(a, b) for a, b in zip(matrix.x[i].tolist(), scalar.vector(), strict=True))


def _scalar_base(mode: str, prof: QueryProfile, doc: list[str], cos: float, ref: Reference) -> float:
    feats = lexical_features(prof, doc)
    if mode == "lexical":
        return lexical_probability(feats)
    if mode == "dense":
        return dense_probability(prof, cos, ref)
    return hybrid_probability(prof, feats, cos, ref)


references = st.builds(
    Reference,
    best_bm25=st.floats(min_value=0.0, max_value=1.0),
    best_coverage=st.floats(min_value=0.0, max_value=1.0),
    best_cosine=st.one_of(st.none(), cosine),
)


@settings(max_examples=200)
@given(
    terms=query,
    df=dfs,
    docs_cos=st.lists(st.tuples(text, cosine), min_size=1, max_size=6),
    ref=references,
    mode=st.sampled_from(MODES),
)
def test_base_probabilities_are_the_modes_scalar_ones(
    terms: list[str], df: dict[str, int], docs_cos: list[tuple[list[str], float]], ref: Reference, mode: str
) -> None:
    """Each text's base relevance over arrays equals lexical_, dense_ or hybrid_probability of it."""
    prof = _profile(terms, df)
    docs = [d for d, _ in docs_cos]
    cosines = np.array([c for _, c in docs_cos])
    got = _batch.base_probabilities(mode, prof, _batch.lexical_matrix(prof, docs), cosines, ref)
    for i, (doc, cos) in enumerate(docs_cos):
        assert _close(float(got[i]), _scalar_base(mode, prof, doc, cos, ref))


@settings(max_examples=200)
@given(
    bases=st.lists(st.floats(min_value=1e-9, max_value=1.0), min_size=1, max_size=6),
    cos=st.lists(cosine, min_size=6, max_size=6),
    pool=deep_pools,
    tops=st.lists(cosine, max_size=3),
    where=st.tuples(st.sampled_from(MODES), st.floats(min_value=0.0, max_value=3.0)),
)
def test_bands_are_the_scalar_band_of_each_text(
    bases: list[float], cos: list[float], pool: list[float], tops: list[float], where: tuple[str, float]
) -> None:
    """Rank, gaps and band over arrays equal `_gate.band_probability(band_features(...))` of each
    text, at any namespace size."""
    mode, size = where
    ref = Reference(pool=tuple(sorted(pool, reverse=True)), top_cosines=tuple(sorted(tops, reverse=True)))
    logits = _batch.logits(np.array(bases))
    cosines = np.array(cos[: len(bases)])
    got = _batch.band_probabilities(mode, logits, cosines, ref, size)
    for i, base in enumerate(bases):
        lg = _gate.logit(base)
        assert _close(float(logits[i]), lg)
        want = _gate.band_probability(mode, _gate.band_features(mode, lg, cos[i], ref), size)
        assert _close(float(got[i]), want)


def test_a_scorer_gives_a_text_the_same_relevance_alone_and_in_a_batch() -> None:
    """Scoring is per text: a batch's relevances are those of each text scored alone, zero ones included."""
    prof = _profile(["caroline", "support", "group"], {"caroline": 3, "group": 40})
    ref = Reference(qpp=0.8, pool=(2.0, 0.5, -1.0), best_bm25=0.4, best_coverage=0.6)
    scorer = Scorer(profile=prof, mode="lexical", reference=ref)
    docs = [["caroline", "went", "to", "a", "support", "group"], ["nothing", "here"], ["group"]]
    batch = scorer.relevances_at(docs)
    assert batch == [scorer.relevance(d) for d in docs]
    assert batch[1].score == 0.0
    assert batch[0].score > batch[2].score > 0.0


def test_dense_scores_without_cosines_are_refused() -> None:
    """A dense or hybrid scorer asked to score texts without their cosines raises ValueError."""
    prof = _profile(["caroline"], {"caroline": 3})
    scorer = Scorer(profile=prof, mode="hybrid", reference=Reference(qpp=0.5))
    with pytest.raises(ValueError, match="cosine"):
        scorer.relevances_at([["caroline"]])


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_a_nan_cosine_has_no_standing_in_either_definition(mode: str) -> None:
    """A NaN cosine (a degenerate vector) gets band 0 over arrays and in the scalar definition alike."""
    ref = Reference(pool=(2.0, 0.5), top_cosines=(0.9, 0.4))
    logits = _batch.logits(np.array([0.7, 0.7]))
    got = _batch.band_probabilities(mode, logits, np.array([math.nan, 0.9]), ref, 0.0)
    want = _gate.band_probability(mode, _gate.band_features(mode, float(logits[0]), math.nan, ref), 0.0)
    assert float(got[0]) == want == 0.0
    assert float(got[1]) > 0.0


class _AxisEmbedder:
    """Embeds a text as the unit vector of its length's axis (4 dimensions): no model, known cosines."""

    dim = 4
    model_id = "axis"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, len(t) % self.dim] = 1.0
        return out


def test_relevances_given_embed_only_the_texts_without_a_cosine() -> None:
    """Known cosines are used as given; the others are embedded in one batch and scored on their
    dot product with the query: the same relevances as `relevances_at` with every cosine."""
    embedder = _AxisEmbedder()
    prof = _profile(["caroline", "support", "group"], {"caroline": 3, "group": 40})
    ref = Reference(qpp=0.8, pool=(2.0, 0.5, -1.0), best_bm25=0.4, best_coverage=0.6, best_cosine=0.9)
    scorer = Scorer(
        profile=prof,
        mode="hybrid",
        reference=ref,
        embedder=embedder,
        query_vector=np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32),
    )
    texts = ["caroline group", "a", "support group b", "lake"]
    terms = [t.split() for t in texts]
    got = scorer.relevances_given(terms, texts, [0.9, None, 0.2, None])
    assert embedder.embedded == ["a", "lake"]
    assert got == scorer.relevances_at(terms, [0.9, 1.0, 0.2, 0.0])
    assert got[1].score > 0.0


@settings(max_examples=200)
@given(terms=query, df=dfs, docs=st.lists(text, max_size=6), unknown=st.booleans())
def test_texts_of_the_in_memory_index_count_the_same_over_ids(
    terms: list[str], df: dict[str, int], docs: list[list[str]], unknown: bool
) -> None:
    """The matrix of texts given as ids of an index's words equals the one of their strings
    (a query term the index never saw counts nothing)."""
    known = WORDS[:-1] if unknown else WORDS  # "c" then has no id: it occurs in no text
    vocab = {w: i for i, w in enumerate(known)}
    table = np.array(known, dtype=object)
    docs = [[t for t in doc if t in vocab] for doc in docs]
    indexed = [IndexedTerms(np.array([vocab[t] for t in d], dtype=np.int32), table, vocab) for d in docs]
    assert not indexed or shared_vocab(indexed) is vocab  # the batch takes the id path
    prof = _profile(terms, df)
    by_ids, by_strings = _batch.lexical_matrix(prof, indexed), _batch.lexical_matrix(prof, docs)
    assert np.array_equal(by_ids.x, by_strings.x)
    assert np.array_equal(by_ids.matched, by_strings.matched)
    # A query's terms repeated (a profile never repeats one, a hand-built query may): the
    # same counts either way, a repeated term counted in its last column.
    repeated = [*terms, *terms[:2]]
    by_ids_counts = _batch._term_counts(repeated, indexed)
    by_strings_counts = _batch._term_counts(repeated, docs)
    assert np.array_equal(by_ids_counts[0], by_strings_counts[0])
    assert np.array_equal(by_ids_counts[1], by_strings_counts[1])
