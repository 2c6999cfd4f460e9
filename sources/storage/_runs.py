"""What a retrieval's runs share: matches held as arrays, read-only, compared by their hits.

A corpus's full-text matches (`LexicalRun`) and nearest vectors
(`DenseRun`) travel from the index to the scoring as a few arrays, never as an
object a match: a turn's objects set off Python's garbage collections, and a store keeps the
retrieval of its recent tasks, whose objects every full collection would walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from ._doc_terms import PackedTerms

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence


class Run:
    """A base of frozen attrs classes with a `rowids` array and `hits()`: read-only arrays
    (kept references share them with every turn that reads them), a length, equality and
    hash by value."""

    rowids: np.ndarray[Any, Any]

    def __attrs_post_init__(self) -> None:
        for value in attrs.astuple(self, recurse=False):  # type: ignore[arg-type]
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    def hits(self) -> Sequence[Hashable]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.rowids)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return tuple(self.hits()) == tuple(other.hits())

    def __hash__(self) -> int:
        return hash(tuple(self.hits()))


@attrs.frozen
class LexicalHit:
    """One FTS match of a task: the source rowid of its corpus, its BM25 rank (FTS5's,
    lower is better) and its analysed terms (the indexed body, so no text is re-analysed).
    What an engine's `lexical_candidates` returns; a turn carries matches as a `LexicalRun`."""

    rowid: int
    rank: float
    terms: Sequence[str]


@attrs.frozen(eq=False)
class LexicalRun(Run):
    """One corpus's FTS matches, best first, as arrays: rowids, ranks and the terms packed
    (`PackedTerms`; `sources.storage._runs`)."""

    rowids: npt.NDArray[np.int64]
    ranks: npt.NDArray[np.float64]
    terms: PackedTerms

    @classmethod
    def pack(cls, hits: Sequence[LexicalHit]) -> LexicalRun:
        return cls(
            rowids=np.fromiter((h.rowid for h in hits), np.int64, len(hits)),
            ranks=np.fromiter((h.rank for h in hits), np.float64, len(hits)),
            terms=PackedTerms.pack([h.terms for h in hits]),
        )

    def head(self, depth: int) -> LexicalRun:
        """The best `depth` matches."""
        return LexicalRun(rowids=self.rowids[:depth], ranks=self.ranks[:depth], terms=self.terms[:depth])

    def hits(self) -> tuple[LexicalHit, ...]:
        """The matches as `LexicalHit`s."""
        return tuple(map(LexicalHit, self.rowids.tolist(), self.ranks.tolist(), self.terms))


@attrs.frozen(kw_only=True)
class Hit:
    """One dense search result: a source rowid and its cosine with the query."""

    rowid: int
    cosine: float


@attrs.frozen(eq=False)
class DenseRun(Run):
    """One corpus's nearest vectors, best first, as two arrays."""

    rowids: npt.NDArray[np.int64]
    cosines: npt.NDArray[np.float64]

    @classmethod
    def pack(cls, hits: Sequence[Hit]) -> DenseRun:
        return cls(
            rowids=np.fromiter((h.rowid for h in hits), np.int64, len(hits)),
            cosines=np.fromiter((h.cosine for h in hits), np.float64, len(hits)),
        )

    def head(self, depth: int) -> DenseRun:
        """The `depth` nearest."""
        return DenseRun(rowids=self.rowids[:depth], cosines=self.cosines[:depth])

    def cosine_of(self) -> dict[int, float]:
        """Rowid -> cosine."""
        return dict(zip(self.rowids.tolist(), self.cosines.tolist(), strict=True))

    def hits(self) -> tuple[Hit, ...]:
        """The rows as `Hit`s."""
        rowids, cosines = self.rowids.tolist(), self.cosines.tolist()
        return tuple(Hit(rowid=r, cosine=c) for r, c in zip(rowids, cosines, strict=True))


__all__ = ["DenseRun", "Hit", "LexicalHit", "LexicalRun", "Run"]
