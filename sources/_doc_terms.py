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

if TYPE_CHECKING:
    import numpy as np
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


__all__ = ["IndexedTerms", "shared_vocab"]
