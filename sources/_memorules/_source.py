"""The memorules source: the rules that apply to a turn's session and task, ranked."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from broker import Candidate
from sources import _results
from sources._source_base import ReaderSource
from sources.storage._engine import CORPUS_ENTRIES

from ._recall import RecallQuery, recall_memorules_on
from ._values import MAX_TOP_K, RecallMatch

if TYPE_CHECKING:
    from broker.abc import SourceRequest
    from sources.storage._engine import Reader


@attrs.define(eq=False)
class MemorulesSource(ReaderSource):
    """The memorules that apply to the turn's session context and task (`memorules` block).

    A candidate's score is its calibrated relevance (so the one floor applies as
    everywhere); candidates come in memorule ranking order, carried as `Candidate.rank`
    (0 = first; also `metadata["memorule_rank"]`), which the selector, admission and the
    context follow. A turn without a session context still ranks them (by confidence).
    """

    name: ClassVar[str] = "memorules"

    def _version(self, conn: Reader, request: SourceRequest) -> _results.Version:
        """Every generation of the tenant: the tenant-wide rules of its other projects apply."""
        return _results.tenant_version(conn, request.namespace)

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        if not request.task.strip():
            return []
        query = RecallQuery(
            query=request.task,
            namespace=request.namespace,
            context=request.context,
            top_k=min(max(request.limit, 1), MAX_TOP_K),
            types=request.types,
            mode=request.mode,
            embedder=self._reader.embedder,
            min_score=self.min_score,
        )
        matches = recall_memorules_on(self._reader.store, conn, query)
        return [self._candidate(m, rank) for rank, m in enumerate(matches)]

    def _candidate(self, m: RecallMatch, rank: int) -> Candidate:
        return Candidate(
            retrieval_key=None if m.rowid is None else (CORPUS_ENTRIES, m.rowid),
            entry_id=m.id,
            source=self.name,
            score=m.score,
            qpp=m.qpp,
            band=m.band,
            text=m.text,
            block="memorules",
            memory_type=m.memory_type,
            created_at=m.written_at,
            rank=rank,
            metadata={
                "kind": "memorule",
                "memorule_kind": m.memorule_kind,
                "applies_to": dict(m.applies_to or {}),
                "confidence": m.confidence,
                "evidence_signal_id": m.evidence_signal_id,
                "memorule_rank": rank,
                "rank_weight": m.rank_weight,
                "namespace": str(m.namespace),
            },
        )
