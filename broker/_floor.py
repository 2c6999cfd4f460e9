"""Pure selection steps: the one calibrated floor, dedupe by entry id, rank, cap — and the
fate of every candidate under them, for `explain`."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

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


SELECTED = "selected"
BELOW_FLOOR = "below the floor"
DEDUPLICATED = "deduplicated"
CUT_BY_BUDGET = "cut by the budget"


@attrs.frozen(kw_only=True)
class Fate:
    """What `select` did with one candidate, and why."""

    candidate: Candidate
    outcome: str
    detail: str | None = None


def fates(
    candidates: Iterable[Candidate], *, budget: int, floor: float = RECALL_MIN_SCORE
) -> tuple[Fate, ...]:
    """The fate of every candidate under `select`: selected, below the floor, deduplicated (a
    better-scored candidate of the same entry won), or cut by the budget. Same order as given."""
    items = tuple(candidates)
    chosen = {b.entry_id: b for b in select(items, budget=budget, floor=floor)}
    winners: dict[str, Candidate] = {}
    for c in items:
        if c.score >= floor and (c.entry_id not in winners or c.score > winners[c.entry_id].score):
            winners[c.entry_id] = c
    out = []
    for c in items:
        if c.score < floor:
            out.append(Fate(candidate=c, outcome=BELOW_FLOOR, detail=f"{c.score:.3f} < {floor}"))
        elif winners[c.entry_id] is not c:
            out.append(
                Fate(candidate=c, outcome=DEDUPLICATED, detail=f"kept from {winners[c.entry_id].source}")
            )
        elif c.entry_id in chosen:
            out.append(Fate(candidate=c, outcome=SELECTED))
        else:
            out.append(Fate(candidate=c, outcome=CUT_BY_BUDGET, detail=f"budget {budget}"))
    return tuple(out)
