"""Pure selection steps: the one calibrated floor, dedupe by entry id, rank, cap."""

from __future__ import annotations

from collections.abc import Iterable

from ._model import Candidate, SelectedBlock

RECALL_MIN_SCORE = 0.42
"""The one relevance floor: a calibrated probability of relevance, the same in every mode
and for every source."""


def select(
    candidates: Iterable[Candidate], *, budget: int, floor: float = RECALL_MIN_SCORE
) -> tuple[SelectedBlock, ...]:
    """Floor, dedupe by entry id (highest score wins, every finder recorded), rank, cap.

    Ties rank by entry id so the order is deterministic.
    """
    best: dict[str, Candidate] = {}
    finders: dict[str, list[str]] = {}
    for c in candidates:
        if c.score < floor:
            continue
        names = finders.setdefault(c.entry_id, [])
        if c.source not in names:
            names.append(c.source)
        held = best.get(c.entry_id)
        if held is None or c.score > held.score:
            best[c.entry_id] = c
    ranked = sorted(best.values(), key=lambda c: (-c.score, c.entry_id))
    return tuple(
        SelectedBlock.from_candidate(c, tuple(finders[c.entry_id])) for c in ranked[: max(budget, 0)]
    )
