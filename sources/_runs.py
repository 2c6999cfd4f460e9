"""What a retrieval's runs share: matches held as arrays, read-only, compared by their hits.

A corpus's full-text matches (`sources._relevance.LexicalRun`) and nearest vectors
(`sources._matrix.DenseRun`) travel from the index to the scoring as a few arrays, never as an
object a match: a turn's objects set off Python's garbage collections, and a store keeps the
retrieval of its recent tasks, whose objects every full collection would walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

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


__all__ = ["Run"]
