"""The versioned `turn.completed` trace event, and the JSON Schema it conforms to.

A turn's trace is a typed value (`TurnTrace` over `TurnFacts`), turned into the JSON event
only at the edge: when the broker logs it, or a host reads it as a mapping. The event
carries ids, scores, counts and reasons — never memory or task text unless the host asks for
it: logs leave the process. The schema ships as package data.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

import attrs

from ._blocks import KIND_MEMORY, MEMORULES

if TYPE_CHECKING:
    from ._model import Block, Namespace, SelectionResult

INFERENCE_TRACE_SCHEMA_VERSION = 9
"""Version of the `turn.completed` event. v5 added the `memory_*` fields; v6 made a score the
product of the task's gate and the memory's band (`qpp`, per-block `band`), with the floor,
whether the query carried the turn's message, and past tasks gated by the floor; v7 counts
distinct memories, `memory_selected` as those that cleared the floor, with `memory_injected`
and `memory_cut_by_budget` beside it, and a ranked block's `rank`; v8 counts in
`memory_candidates` the memories the sources considered, below the floor included, not only
those they returned; v9 reports `qpp` also when the gate kept every memory out. Readers
ignore keys they do not know."""

TURN_COMPLETED = "turn.completed"
"""The event name, stable across versions."""

SCHEMA_RESOURCE = "trace-v9.schema.json"
_ERROR_CHARS = 200


@attrs.frozen(kw_only=True)
class BlockTrace:
    """One admitted or dropped block as the trace shows it."""

    name: str
    kind: str
    tokens: int
    entry_id: str | None = None
    score: float | None = None
    band: float | None = None
    source: str | None = None
    reason: str | None = None
    rank: int | None = None
    text: str | None = attrs.field(default=None, repr=False)

    @classmethod
    def of(cls, block: Block, *, reason: str | None = None) -> BlockTrace:
        """The trace of a rendered block (`reason`: why it was dropped)."""
        return cls(
            name=block.name,
            kind=block.kind,
            tokens=block.tokens,
            entry_id=block.entry_id,
            score=block.score,
            band=block.band,
            source=block.source,
            reason=reason,
            rank=block.rank,
            text=block.text,
        )

    def as_dict(self, *, include_text: bool) -> dict[str, Any]:
        """Return the JSON shape; `text` only when the host asked for text."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "tokens": self.tokens}
        for key in ("entry_id", "score", "band", "source", "rank", "reason"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if include_text and self.text is not None:
            out["text"] = self.text
        return out


@attrs.frozen(kw_only=True)
class TurnFacts:
    """Everything one turn decided, gathered by the broker for its trace event."""

    turn_id: str
    task_id: str
    namespace: Namespace
    total_ms: float
    selection_ms: float | None
    selection: SelectionResult | None
    memory_unavailable_reason: str | None
    admitted: tuple[BlockTrace, ...]
    dropped: tuple[BlockTrace, ...]
    memory_budget: int
    input_budget: int
    task_over_budget: bool
    floor: float
    query_has_message: bool = False
    history_selected: int = 0
    history_unavailable_reason: str | None = None
    task_text: str | None = attrs.field(default=None, repr=False)


def _sources(selection: SelectionResult | None) -> list[dict[str, Any]]:
    if selection is None:
        return []
    out = []
    for s in selection.sources:
        item: dict[str, Any] = {
            "name": s.name,
            "status": str(s.status),
            "latency_ms": round(s.latency_ms, 3),
            "candidates": s.candidates,
        }
        if s.error is not None:
            item["error"] = s.error[:_ERROR_CHARS]
        out.append(item)
    return out


@attrs.frozen(kw_only=True)
class MemoryCounts:
    """The turn's memory counts as the trace reports them (v8): every memory once."""

    candidates: int
    """Distinct memories the sources considered (returned, or weighed by their retrieval)."""
    selected: int
    """Of those, how many cleared the floor."""
    injected: int
    """Memories that entered the context."""

    @property
    def cut_by_budget(self) -> int:
        """Cleared the floor, but cut by the selection budget or dropped at admission."""
        return max(self.selected - self.injected, 0)

    @property
    def irrelevant_rate(self) -> float | None:
        """Share of the considered memories that did not clear the floor (None without any)."""
        return None if self.candidates == 0 else (self.candidates - self.selected) / self.candidates

    @classmethod
    def of(cls, facts: TurnFacts) -> MemoryCounts:
        """Count from the selection's tally and the admitted blocks."""
        injected = sum(1 for b in facts.admitted if b.kind == KIND_MEMORY)
        if facts.selection is None:
            return cls(candidates=0, selected=0, injected=injected)
        tally = facts.selection.memory_tally
        return cls(candidates=tally.candidates, selected=tally.cleared, injected=injected)


def turn_completed(facts: TurnFacts, *, include_text: bool = False) -> dict[str, Any]:
    """Build the `turn.completed` fields (without `event`, which the logger adds)."""
    sel = facts.selection
    counts = MemoryCounts.of(facts)
    event: dict[str, Any] = {
        "schema_version": INFERENCE_TRACE_SCHEMA_VERSION,
        "turn_id": facts.turn_id,
        "task_id": facts.task_id,
        "namespace": {"tenant": facts.namespace.tenant_id, "project": facts.namespace.project_id},
        "timings": _timings(facts),
        "qpp": None if sel is None else sel.qpp,
        "floor": facts.floor,
        "query_has_message": facts.query_has_message,
        **_counts(counts, facts),
        "memory_types_queried": None if sel is None or sel.types_queried is None else list(sel.types_queried),
        "irrelevant_memory_rate": counts.irrelevant_rate,
        "recall_mode": None if sel is None else sel.mode,
        "sources": _sources(sel),
        **_blocks(facts, include_text=include_text),
    }
    if facts.memory_unavailable_reason is not None:
        event["memory_unavailable_reason"] = facts.memory_unavailable_reason
    if include_text and facts.task_text is not None:
        event["task_text"] = facts.task_text
    if facts.history_unavailable_reason is not None:
        event["history_unavailable_reason"] = facts.history_unavailable_reason
    return event


def _timings(facts: TurnFacts) -> dict[str, Any]:
    timings: dict[str, Any] = {
        "total_ms": round(facts.total_ms, 3),
        "selection_ms": None if facts.selection_ms is None else round(facts.selection_ms, 3),
    }
    if facts.selection is not None:
        timings["queue_ms"] = round(facts.selection.queued_ms, 3)
    return timings


def _counts(counts: MemoryCounts, facts: TurnFacts) -> dict[str, Any]:
    return {
        "memory_candidates": counts.candidates,
        "memory_selected": counts.selected,
        "memory_injected": counts.injected,
        "memory_cut_by_budget": counts.cut_by_budget,
        "history_selected": facts.history_selected,
        "memory_abstained": counts.injected == 0,
    }


def _blocks(facts: TurnFacts, *, include_text: bool) -> dict[str, Any]:
    admitted = facts.admitted
    return {
        "blocks": [b.as_dict(include_text=include_text) for b in admitted],
        "dropped": [b.as_dict(include_text=include_text) for b in facts.dropped],
        "memory_budget": facts.memory_budget,
        "input_budget": facts.input_budget,
        "memory_tokens": sum(b.tokens for b in admitted if b.kind == KIND_MEMORY),
        "total_tokens": sum(b.tokens for b in admitted),
        "task_over_budget": facts.task_over_budget,
        "memorule_ids": [b.entry_id for b in admitted if b.name == MEMORULES and b.entry_id],
    }


@attrs.frozen(kw_only=True)
class TurnTrace(Mapping[str, Any]):
    """One turn's trace: the typed facts, read as the `turn.completed` event's fields.

    The JSON event is built once, on first read (`event`, or any mapping access); the facts
    are there for code that wants them typed.
    """

    facts: TurnFacts
    include_text: bool = False

    @functools.cached_property
    def event(self) -> Mapping[str, Any]:
        """The `turn.completed` fields (without `event`, which the logger adds)."""
        return turn_completed(self.facts, include_text=self.include_text)

    def __getitem__(self, key: str) -> Any:  # noqa: ANN401 - a JSON value
        return self.event[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.event)

    def __len__(self) -> int:
        return len(self.event)


@functools.cache
def _schema_text() -> str:
    return resources.files("broker").joinpath("data", SCHEMA_RESOURCE).read_text(encoding="utf-8")


def trace_schema() -> dict[str, Any]:
    """Load the JSON Schema (draft 2020-12) of the `turn.completed` event from package data."""
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema
