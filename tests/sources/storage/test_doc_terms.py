"""Tests of `IndexedTerms`: ids of an index's words that read, compare and hash as their terms."""

from __future__ import annotations

import numpy as np
import pytest
from gc_kit import tracked_reachable
from hypothesis import given
from hypothesis import strategies as st

from sources.storage._doc_terms import IndexedTerms, PackedTerms, gather, shared_vocab
from sources.storage._runs import LexicalHit, LexicalRun

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


DOCS = st.lists(st.lists(st.sampled_from(WORDS), max_size=6), max_size=8)


@given(DOCS, st.booleans(), st.integers(0, 9), st.data())
def test_packed_terms_read_as_what_was_packed(
    docs: list[list[str]], indexed: bool, n: int, data: st.DataObject
) -> None:
    """Packed, documents keep their terms, in order, as the kind they were (ids or tuples),
    item by item, sliced and taken in any order."""
    packed = PackedTerms.pack([_indexed(d) if indexed else tuple(d) for d in docs])
    assert len(packed) == len(docs)
    assert [tuple(d) for d in packed] == [tuple(d) for d in docs]
    assert [tuple(packed[i]) for i in range(len(docs))] == [tuple(d) for d in docs]
    assert [tuple(d) for d in packed[:n]] == [tuple(d) for d in docs[:n]]
    order = data.draw(st.lists(st.integers(0, len(docs) - 1), max_size=10)) if docs else []
    assert [tuple(d) for d in packed.take(order)] == [tuple(docs[i]) for i in order]
    if indexed and docs:
        assert all(isinstance(d, IndexedTerms) and d.vocab is VOCAB for d in packed)
    assert packed == PackedTerms.pack([tuple(d) for d in docs])


@given(DOCS, st.data())
def test_the_id_form_is_each_document_ids_in_turn(docs: list[list[str]], data: st.DataObject) -> None:
    """What the scoring counts over: the ids of the documents taken, one after another, and their lengths."""
    packed = PackedTerms.pack([_indexed(d) for d in docs])
    order = data.draw(st.lists(st.integers(0, len(docs) - 1), max_size=10)) if docs else []
    form = PackedTerms.pack([_indexed(docs[i]) for i in order]).id_form() if order else None
    taken = packed.take(order).id_form()
    if form is None:
        assert taken is None or not order
        return
    assert taken is not None
    assert taken[1].tolist() == [VOCAB[t] for i in order for t in docs[i]]
    assert taken[2].tolist() == [len(docs[i]) for i in order]


def test_packed_terms_hold_no_object_a_document() -> None:
    """A thousand documents packed are a few objects the garbage collector walks, not a thousand."""
    docs = [_indexed(["paint", "lake", "group"]) for _ in range(1000)]
    assert tracked_reachable(PackedTerms.pack(docs)) < 10
    assert tracked_reachable(PackedTerms.pack([tuple(d) for d in docs])) < 10


@given(st.lists(st.lists(st.integers(0, 9), max_size=5), max_size=6), st.data())
def test_gather_reads_each_span_in_turn(docs: list[list[int]], data: st.DataObject) -> None:
    """`gather` is the spans' ids one after another, in the order asked, repeats included."""
    ids = np.array([i for d in docs for i in d], dtype=np.int32)
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    ends = np.cumsum(lengths)
    order = np.array(
        data.draw(st.lists(st.integers(0, len(docs) - 1), max_size=8)) if docs else [], dtype=np.int64
    )
    assert gather(ids, (ends - lengths)[order], ends[order]).tolist() == [
        i for k in order.tolist() for i in docs[k]
    ]


def test_packing_reads_every_word_when_documents_hold_older_words_arrays() -> None:
    """An index's words array is replaced by a longer copy as it grows: documents read before
    the growth hold the shorter one, and packed with later ones every term still reads."""
    old_words = TABLE[:3].copy()
    old = IndexedTerms(np.array([VOCAB["caroline"]], dtype=np.int32), old_words, VOCAB)
    new = _indexed(["lake", "paint"])
    packed = PackedTerms.pack([old, new])
    assert [tuple(d) for d in packed] == [("caroline",), ("lake", "paint")]


def test_packed_arrays_are_read_only_and_runs_compare_and_hash_by_value() -> None:
    """Kept references share their runs with every reader: nobody can write to them; two runs
    of the same matches are equal and hash alike, whether their terms are ids or tuples."""
    docs = [["paint", "lake"], ["group"]]
    hits = [LexicalHit(rowid=i + 1, rank=-1.0 - i, terms=_indexed(d)) for i, d in enumerate(docs)]
    run = LexicalRun.pack(hits)
    plain = LexicalRun.pack([LexicalHit(rowid=h.rowid, rank=h.rank, terms=tuple(h.terms)) for h in hits])
    assert run == plain
    assert hash(run) == hash(plain)
    assert run.head(1).hits() == tuple(hits[:1])
    with pytest.raises(ValueError, match="read-only"):
        run.head(1).rowids[0] = 99
    shared = run.terms.take([1, 0])[1]
    assert isinstance(shared, IndexedTerms)
    with pytest.raises(ValueError, match="read-only"):
        shared.ids[0] = 3
