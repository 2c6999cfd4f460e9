"""The `store` source and the typed `persona` lane: one recall, two configurations.

`store` is typed recall through the store's calibrated gate; `persona` is the same recall
fixed to `self`/`personality`, keyed on the active task only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from broker import Candidate

from ._scoring import best_first
from ._source_base import ReaderSource
from .storage._engine import CORPUS_ENTRIES

if TYPE_CHECKING:
    from broker.abc import SourceRequest

    from ._store_view import StoreView
    from .storage._engine import Reader
    from .storage._entries import Recalled

PERSONA_TYPES: tuple[str, ...] = ("self", "personality")
"""The memory types of the persona lane."""
_MAX_LIMIT = 1000  # MemoryStore.MAX_RECALL_LIMIT
_OWN_SOURCE = frozenset({"memorule", "neuron"})
"""Entry kinds another source owns (with a rule of its own for when they enter a turn)."""


@attrs.define(eq=False)
class StoreSource(ReaderSource):
    """Typed recall of store entries through the store's calibrated gate.

    The store's recall applies the source's floor (`min_score`: RECALL_MIN_SCORE unless
    lowered), so every candidate it returns is already above it.
    """

    name: ClassVar[str] = "store"
    block: ClassVar[str] = "memory"
    gated: ClassVar[bool] = True  # recall_on returns nothing under the floor's gate
    lane: ClassVar[tuple[str, ...] | None] = None
    """Types this source is fixed to (None: the request's types, or all)."""

    _store: StoreView = attrs.field(kw_only=True)

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        types = self._types(request.types)
        if types == ():
            return []
        limit = min(max(request.limit, 1), _MAX_LIMIT)
        recalled = self._store.recall_on(
            conn,
            request.task,
            namespace=request.namespace,
            types=types,
            limit=limit,
            min_score=self.min_score,
            mode=request.mode,
            embedder=self._reader.embedder,
        )
        # Memorules surface only through the memorules source, which applies their
        # `applies_to` visibility to the session context; neurons only through the neurons
        # source, when the task holds one of their triggers.
        return best_first((self._candidate(r) for r in recalled if r.memory.kind not in _OWN_SOURCE), limit)

    def _types(self, asked: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """Return the types to query: the lane's, narrowed by the request's if it has any."""
        if self.lane is None:
            return asked
        if asked is None:
            return self.lane
        return tuple(t for t in self.lane if t in asked)

    def _candidate(self, r: Recalled) -> Candidate:
        m = r.memory
        return Candidate(
            retrieval_key=None if r.rowid is None else (CORPUS_ENTRIES, r.rowid),
            entry_id=m.id,
            source=self.name,
            score=r.score,
            qpp=r.qpp,
            band=r.band,
            text=m.text,
            block=self.block,
            memory_type=m.memory_type,
            created_at=m.created_at,
            metadata=_metadata(r),
        )


@attrs.define(eq=False)
class PersonaSource(StoreSource):
    """The typed persona lane: `self`/`personality` recall keyed on the active task.

    Unclassified rows are included; candidates go to the `persona_memories` block. With
    typed requests it runs only for the persona types the request asks for.
    """

    name: ClassVar[str] = "persona"
    block: ClassVar[str] = "persona_memories"
    lane: ClassVar[tuple[str, ...] | None] = PERSONA_TYPES


def _metadata(r: Recalled) -> dict[str, Any]:
    """A candidate's metadata: the memory's kind, importance and own metadata, and the score
    of its own words when its conversation context ranked it elsewhere (`own_score`)."""
    m = r.memory
    found: dict[str, Any] = {"kind": m.kind, "importance": m.importance, "metadata": dict(m.metadata)}
    if r.own_score is not None:
        found["own_score"] = r.own_score
    return found
