"""Tests of `IndexedTerms`: ids of an index's words that read, compare and hash as their terms."""

from __future__ import annotations

import numpy as np
from gc_kit import tracked_reachable
from hypothesis import given
from hypothesis import strategies as st

from sources._doc_terms import IndexedTerms, PackedTerms, shared_vocab

WORDS = ["caroline", "support", "group", "paint", "lake"]
VOCAB = {w: i for i, w in enumerate(WORDS)}
TABLE = np.array(WORDS, dtype=object)


def _indexed(terms: list[str], vocab: dict[str, int] = VOCAB) -> IndexedTerms:
    return IndexedTerms(np.array([VOCAB[t] for t in terms], dtype=np.int32), TABLE, vocab)


@given(st.lists(st.sampled_from(WORDS), max_size=12))
def test_indexed_terms_read_as_the_tuple_of_their_terms(terms: list[str]) -> None:
    """Length, order, items, slices, equality and hash are those of the terms' tuple."""
    doc = _indexed(terms)
    assert len(doc) == len(terms)
    assert list(doc) == terms
    assert doc == tuple(terms)
    assert tuple(terms) == doc
    assert doc == terms
    assert hash(doc) == hash(tuple(terms))
    assert doc[1:3] == tuple(terms[1:3])
    if terms:
        assert doc[-1] == terms[-1]
        assert doc != (*terms, "extra")


def test_indexed_terms_never_equal_a_string_or_a_number() -> None:
    """Only sequences of terms compare: a joined body is not its terms."""
    doc = _indexed(["paint", "lake"])
    assert doc != "paint lake"
    assert doc != 2


def test_a_shared_vocabulary_is_found_only_when_every_text_has_it() -> None:
    """A batch counts over ids only when all its texts come from one index."""
    a, b = _indexed(["paint"]), _indexed(["lake", "group"])
    assert shared_vocab([a, b]) is VOCAB
    assert shared_vocab([a, ("lake",)]) is None
    assert shared_vocab([("lake",), a]) is None
    assert shared_vocab([a, _indexed(["lake"], dict(VOCAB))]) is None
    assert shared_vocab([]) is None


@given(st.lists(st.lists(st.sampled_from(WORDS), max_size=6), max_size=8), st.booleans(), st.integers(0, 9))
def test_packed_terms_unpack_to_what_was_packed(docs: list[list[str]], indexed: bool, n: int) -> None:
    """Packing keeps each document's terms, in order, as the kind it was (ids or tuples)."""
    given_docs = [_indexed(d) if indexed else tuple(d) for d in docs]
    packed = PackedTerms.pack(given_docs)
    back = packed.unpack(n)
    assert len(packed) == len(docs)
    assert [tuple(d) for d in back] == [tuple(d) for d in docs[:n]]
    if indexed and docs:
        assert all(isinstance(d, IndexedTerms) and d.vocab is VOCAB for d in back)
    assert packed == PackedTerms.pack([tuple(d) for d in docs])


def test_packed_terms_hold_no_object_a_document() -> None:
    """A thousand documents packed are a few objects the garbage collector walks, not a thousand."""
    docs = [_indexed(["paint", "lake", "group"]) for _ in range(1000)]
    assert tracked_reachable(PackedTerms.pack(docs)) < 10
    assert tracked_reachable(PackedTerms.pack([tuple(d) for d in docs])) < 10
