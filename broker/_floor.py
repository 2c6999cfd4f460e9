"""Pure selection steps: the one calibrated floor, dedupe by entry id, rank, cap — and the
fate of every candidate under them, for `explain`, and the tally of what the sources found.

Ranking is by score, best first, except where a source ranks its own candidates
(`Candidate.rank`, the memorules source): the places its candidates of a block win by score
are filled by them in the source's order. So a ranked block gets as many places, as high,
as its scores earn — rank never lets a source take more of the budget — but which of its
candidates takes them, and is cut last, is the source's call.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from collections.abc import Set as AbstractSet

import attrs

from ._blocks import HISTORY_BLOCK
from ._model import Candidate, SelectedBlock, Tally

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
    ranked = rank(best.values())
    return tuple(
        SelectedBlock.from_candidate(c, tuple(finders[c.entry_id])) for c in ranked[: max(budget, 0)]
    )


def rank(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Best score first (ties by entry id); a source's ranked candidates of one block take
    that block's places in their own order (`Candidate.rank`, ties by score)."""
    ordered = sorted(candidates, key=lambda c: (-c.score, c.entry_id))
    groups: dict[tuple[str, str], list[int]] = {}
    for place, c in enumerate(ordered):
        if c.rank is not None:
            groups.setdefault((c.block, c.source), []).append(place)
    out = list(ordered)
    for places in groups.values():
        own = sorted((ordered[p] for p in places), key=_own_order)
        for place, c in zip(places, own, strict=True):
            out[place] = c
    return out


def _own_order(c: Candidate) -> tuple[int, float, str]:
    return (c.rank if c.rank is not None else 0, -c.score, c.entry_id)


def tally(
    candidates: Sequence[Candidate],
    *,
    floor: float = RECALL_MIN_SCORE,
    considered: AbstractSet[Hashable] = frozenset(),
) -> tuple[Tally, Tally]:
    """Distinct memories and distinct past tasks considered, and how many cleared the floor.

    An entry counts once, in the block of its best-scored candidate (the one dedupe keeps).
    `considered` are the keys of the memories the sources' retrieval weighed without
    returning them all (`SourceAnswer.considered`): each key no candidate carries
    (`Candidate.retrieval_key`) is one more memory, under the floor.
    """
    best: dict[str, Candidate] = {}
    for c in candidates:
        if c.entry_id not in best or c.score > best[c.entry_id].score:
            best[c.entry_id] = c
    memories = [c for c in best.values() if c.block != HISTORY_BLOCK]
    history = [c for c in best.values() if c.block == HISTORY_BLOCK]
    returned = {c.retrieval_key for c in candidates if c.retrieval_key is not None}
    unreturned = len(considered - returned) if considered else 0
    counted = _count(memories, floor)
    return attrs.evolve(counted, candidates=counted.candidates + unreturned), _count(history, floor)


def _count(best: Sequence[Candidate], floor: float) -> Tally:
    return Tally(candidates=len(best), cleared=sum(1 for c in best if c.score >= floor))


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
