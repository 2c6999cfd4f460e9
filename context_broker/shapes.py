"""The JSON shapes of library results, each defined once: what `select --json` and `recall
--json` print and what the MCP tools `select` and `recall` return (evaluation pipelines read them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker import RECALL_MIN_SCORE, SelectionResult
from sources import RecallMatch

if TYPE_CHECKING:
    from collections.abc import Mapping

_MEMORULE_FIELDS = ("memorule_kind", "applies_to", "confidence", "evidence_signal_id", "written_at")


def source_type(block: str) -> str:
    """`memorule` (the memorules block) or `memory`, as `semantic_recall` names them; a past task
    (the history block) is `past_task`."""
    return {"memorules": "memorule", "history": "past_task"}.get(block, "memory")


def own_score(metadata: Mapping[str, Any]) -> float | None:
    """The score of a memory's own words when its conversation context ranked it elsewhere
    (`score` is then the rank's), else None."""
    own = metadata.get("own_score")
    return None if own is None else round(float(own), 6)


def result_json(r: SelectionResult) -> dict[str, Any]:
    """The JSON shape of a SelectionResult (evaluation pipelines read it)."""
    return {
        "blocks": [
            {
                "entry_id": b.entry_id,
                "source": b.source,
                "sources": list(b.sources),
                "block": b.block,
                "source_type": source_type(b.block),
                "rank": b.rank,
                "score": round(b.score, 6),
                "own_score": own_score(b.metadata),
                "band": None if b.band is None else round(b.band, 6),
                "memory_type": b.memory_type,
                "created_at": b.created_at,
                "text": b.text,
            }
            for b in r.blocks
        ],
        "qpp": None if r.qpp is None else round(r.qpp, 6),
        "floor": RECALL_MIN_SCORE,
        "candidates_evaluated": r.candidates_evaluated,
        "selected_count": r.selected_count,
        "abstained": r.abstained,
        "irrelevant_memory_rate": r.irrelevant_memory_rate,
        # What the rate is read from: memories only, past tasks apart (the two counts above hold both).
        "memory_candidates": r.memory_tally.candidates,
        "memory_cleared": r.memory_tally.cleared,
        "types_queried": list(r.types_queried) if r.types_queried is not None else None,
        "sources": [
            {
                "name": s.name,
                "status": str(s.status),
                "latency_ms": round(s.latency_ms, 3),
                "candidates": s.candidates,
                "error": s.error,
            }
            for s in r.sources
        ],
    }


def recall_row(m: RecallMatch) -> dict[str, Any]:
    """One match as `recall --json` and the MCP `recall` tool print it: the memory, its
    `source_type`, and a memorule's own fields (kind, applies_to, confidence, evidence, written_at)."""
    row: dict[str, Any] = {
        "id": m.id,
        "score": round(m.score, 6),
        "text": m.text,
        "memory_type": m.memory_type,
        "kind": m.kind,
        "created_at": m.created_at,
        "source_type": m.source_type,
    }
    if m.source_type == "memorule":
        full = m.as_dict()
        row.update({k: full[k] for k in _MEMORULE_FIELDS})
    return row
