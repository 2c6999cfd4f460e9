"""What the sources read of a store in a turn: `StoreView`, the one protocol they type against.

`sources.MemoryStore` is its implementation (and the writers' store); the read side (the
store's reader, the sources, entry and memorule recall) sees only these members, so a change
inside the store stays inside it unless it changes one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Unpack

if TYPE_CHECKING:
    from collections.abc import Iterable

    from broker import Namespace
    from broker.abc import Embedder

    from .relevance._relevance import QueryProfile
    from .relevance._scorer import Scorer
    from .storage._engine import Engine, Reader
    from .storage._entries import Recalled, RecallOptions
    from .storage._lane import ReadLane
    from .storage._runs import LexicalRun
    from .storage._text_index import TextIndex
    from .storage._vectors import VectorIndex


class StoreView(Protocol):
    """A store as its sources read it: its engine and embedder, its in-memory indexes, and the
    per-turn values it computes once for every source (the query's profile, scorer and lexical
    retrieval)."""

    @property
    def engine(self) -> Engine: ...
    @property
    def embedder(self) -> Embedder | None: ...
    @property
    def mode(self) -> str: ...
    @property
    def read_lane(self) -> ReadLane: ...
    @property
    def texts(self) -> TextIndex: ...
    @property
    def vindex(self) -> VectorIndex | None: ...
    def warm(self, *, namespaces: Iterable[Namespace] | None = None) -> None: ...
    def require_embedder(self, what: str) -> Embedder: ...
    def profile_on(self, conn: Reader, ns_id: int | None, query: str) -> QueryProfile: ...
    def lexical_on(self, conn: Reader, ns_id: int, query: str) -> tuple[LexicalRun, ...]: ...
    def scorer_on(
        self, conn: Reader, ns_id: int | None, query: str, *, mode: str, embedder: Embedder | None = None
    ) -> Scorer: ...
    def recall_on(
        self,
        conn: Reader,
        query: str,
        *,
        namespace: Namespace,
        embedder: Embedder | None = None,
        **options: Unpack[RecallOptions],
    ) -> list[Recalled]: ...
