"""A document's indexed terms as ids of its text index's vocabulary, read as strings on demand.

The in-memory text index (`sources._postings`) keeps every document's terms as integer ids.
A turn scores a few hundred indexed documents against the task's few terms: counting those
terms over the ids (`sources._batch`) costs a fraction of building every document's terms as
Python strings and looking each one up. `IndexedTerms` carries the ids with the index's
vocabulary both ways, and is still a sequence of the terms (equal to their tuple), so any
other reader sees the analysed body it always saw.
"""

from __future__ import annotations

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


@attrs.frozen(eq=False)
class PackedTerms:
    """Many documents' terms held in a few objects: one array of ids with each document's end
    (documents of one text index), or one tuple of term tuples (which the garbage collector
    stops walking after it first meets them). A store keeps the shared retrieval of recent
    tasks across turns; held as one object a document, it is what every full collection walks.
    """

    ends: npt.NDArray[np.int64]
    ids: npt.NDArray[np.int32] | None = None
    words: npt.NDArray[np.object_] | None = None
    vocab: Mapping[str, int] | None = None
    plain: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def pack(cls, docs: Sequence[Sequence[str]]) -> PackedTerms:
        ends = np.cumsum(np.fromiter(map(len, docs), np.int64, len(docs)))
        vocab = shared_vocab(docs)
        if vocab is None:
            return cls(ends=ends, plain=tuple(tuple(d) for d in docs))
        indexed = [d for d in docs if isinstance(d, IndexedTerms)]
        ids = np.concatenate([d.ids for d in indexed]).astype(np.int32, copy=False)
        return cls(ends=ends, ids=ids, words=indexed[0].words, vocab=vocab)

    def __len__(self) -> int:
        return len(self.ends)

    def unpack(self, n: int) -> list[Sequence[str]]:
        """The first `n` documents' terms, as they were packed (`IndexedTerms` views or tuples)."""
        if self.ids is None or self.words is None or self.vocab is None:
            return list(self.plain[:n])
        ends = self.ends[:n].tolist()
        starts = [0, *ends][:-1]
        ids, words, vocab = self.ids, self.words, self.vocab
        return [IndexedTerms(ids[a:b], words, vocab) for a, b in zip(starts, ends, strict=True)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedTerms):
            return NotImplemented
        return [tuple(d) for d in self.unpack(len(self))] == [tuple(d) for d in other.unpack(len(other))]

    __hash__ = None  # type: ignore[assignment]


__all__ = ["IndexedTerms", "PackedTerms", "shared_vocab"]
