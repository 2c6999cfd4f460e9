"""A document's indexed terms as ids of its text index's vocabulary, read as strings on demand.

The in-memory text index (`sources.storage._postings`) keeps every document's terms as integer ids.
A turn scores a few hundred indexed documents against the task's few terms: counting those
terms over the ids (`sources.relevance._batch`) costs a fraction of building every document's terms as
Python strings and looking each one up. `IndexedTerms` carries the ids with the index's
vocabulary both ways, and is still a sequence of the terms (equal to their tuple), so any
other reader sees the analysed body it always saw.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, overload

import attrs
import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt


class IndexedTerms(Sequence[str]):
    """The terms of one indexed document: `ids` into `words` (id -> term), `vocab` the same
    index's term -> id. Immutable: the index only ever adds words, so an id keeps its term."""

    __slots__ = ("ids", "vocab", "words")

    def __init__(
        self, ids: npt.NDArray[np.int32], words: npt.NDArray[np.object_], vocab: Mapping[str, int]
    ) -> None:
        self.ids = ids
        self.words = words
        self.vocab = vocab

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...
    def __getitem__(self, i: int | slice) -> str | tuple[str, ...]:
        if isinstance(i, slice):
            return tuple(self.words[self.ids[i]].tolist())
        return str(self.words[self.ids[i]])

    def __iter__(self) -> Iterator[str]:
        return iter(self.words[self.ids].tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IndexedTerms | tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"IndexedTerms({tuple(self)!r})"


def shared_vocab(docs: Sequence[Sequence[str]]) -> Mapping[str, int] | None:
    """The vocabulary every one of `docs` is indexed under, or None when one is not an
    `IndexedTerms` or they come from different indexes."""
    if not docs or not isinstance(docs[0], IndexedTerms):
        return None
    vocab = docs[0].vocab
    for doc in docs:
        if not isinstance(doc, IndexedTerms) or doc.vocab is not vocab:
            return None
    return vocab


def gather(
    ids: npt.NDArray[np.int32], starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> npt.NDArray[np.int32]:
    """`ids[starts[i]:ends[i]]` of every i, one after another, in one indexing."""
    lengths = ends - starts
    total = np.cumsum(lengths)
    n = int(total[-1]) if len(total) else 0
    return ids[np.repeat(starts - (total - lengths), lengths) + np.arange(n)]


@attrs.frozen(eq=False)
class _Spans:
    """Documents as spans [starts, ends) of one array of an index's term ids."""

    ids: npt.NDArray[np.int32]
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    words: npt.NDArray[np.object_]
    vocab: Mapping[str, int]

    def __attrs_post_init__(self) -> None:
        # Kept references share these with every turn that reads them: nobody writes to them.
        for array in (self.ids, self.starts, self.ends):
            array.setflags(write=False)

    def doc(self, a: int, b: int) -> IndexedTerms:
        return IndexedTerms(self.ids[a:b], self.words, self.vocab)

    def take(self, at: npt.NDArray[np.int64]) -> _Spans:
        return attrs.evolve(self, starts=self.starts[at], ends=self.ends[at])


class PackedTerms(Sequence[Sequence[str]]):
    """Many documents' terms in a few objects: spans of one array of term ids (documents of one
    text index; item i is an `IndexedTerms` view), or one tuple of term tuples (which the
    garbage collector stops walking once it has met them).

    A turn's retrieval moves a few hundred documents' terms from the text index to the
    scoring (`sources.relevance._batch` counts the query's terms over the ids directly), and a store
    keeps the retrieval of recent tasks across turns: held as one object a document, they were
    what most young collections, and every full one, walked.
    """

    __slots__ = ("_plain", "_spans")

    def __init__(self, plain: tuple[tuple[str, ...], ...] = (), spans: _Spans | None = None) -> None:
        self._plain = plain
        self._spans = spans

    @classmethod
    def pack(cls, docs: Sequence[Sequence[str]]) -> PackedTerms:
        """`docs` packed: as ids when every one is an `IndexedTerms` of one index, else as tuples."""
        if isinstance(docs, PackedTerms):
            return docs
        vocab = shared_vocab(docs)
        indexed = [d for d in docs if isinstance(d, IndexedTerms)]
        if vocab is None or not indexed:
            return cls(plain=tuple(tuple(d) for d in docs))
        lengths = np.fromiter(map(len, indexed), np.int64, len(indexed))
        ends = np.cumsum(lengths)
        ids = np.concatenate([d.ids for d in indexed]).astype(np.int32, copy=False)
        # One index's words array only grows (replaced by a longer copy): the longest holds every id.
        words = max((d.words for d in indexed), key=len)
        return cls.spans(ids, ends - lengths, ends, words, vocab)

    @classmethod
    def spans(
        cls,
        ids: npt.NDArray[np.int32],
        starts: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        words: npt.NDArray[np.object_],
        vocab: Mapping[str, int],
    ) -> PackedTerms:
        """Documents `ids[starts[i]:ends[i]]` of the index whose words (id -> term) and
        vocabulary (term -> id) these are."""
        return cls(spans=_Spans(ids, starts, ends, words, vocab))

    def __len__(self) -> int:
        return len(self._plain) if self._spans is None else len(self._spans.ends)

    @overload
    def __getitem__(self, i: int) -> Sequence[str]: ...
    @overload
    def __getitem__(self, i: slice) -> PackedTerms: ...
    def __getitem__(self, i: int | slice) -> Sequence[str] | PackedTerms:
        if isinstance(i, slice):
            return self.take(range(len(self))[i])
        if self._spans is None:
            return self._plain[i]
        return self._spans.doc(int(self._spans.starts[i]), int(self._spans.ends[i]))

    def __iter__(self) -> Iterator[Sequence[str]]:
        spans = self._spans
        if spans is None:
            return iter(self._plain)
        return itertools.starmap(spans.doc, zip(spans.starts.tolist(), spans.ends.tolist(), strict=True))

    def take(self, order: Sequence[int]) -> PackedTerms:
        """The documents at `order`, in that order (no term id is copied)."""
        if self._spans is None:
            return PackedTerms(plain=tuple(self._plain[i] for i in order))
        return PackedTerms(spans=self._spans.take(np.asarray(order, dtype=np.int64)))

    def id_form(self) -> tuple[Mapping[str, int], npt.NDArray[np.int32], npt.NDArray[np.int64]] | None:
        """(vocabulary, every document's term ids one after another, each one's length), or
        None for documents packed as tuples."""
        spans = self._spans
        if spans is None:
            return None
        return spans.vocab, gather(spans.ids, spans.starts, spans.ends), spans.ends - spans.starts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedTerms):
            return NotImplemented
        return [tuple(d) for d in self] == [tuple(d) for d in other]

    def __hash__(self) -> int:
        return hash(tuple(tuple(d) for d in self))

    def __repr__(self) -> str:
        return f"PackedTerms({[tuple(d) for d in self]!r})"


__all__ = ["IndexedTerms", "PackedTerms", "gather", "shared_vocab"]
