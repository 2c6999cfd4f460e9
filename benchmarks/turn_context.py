"""A conversation turn read in its context (`sources.relevance._turn_context`): how its weights rank the
LoCoMo dev questions' evidence, and what each part buys.

Every turn of each dev conversation is an episodic memory of its own namespace (as
`../shared/tools/heldout_eval.py` stores them); each answerable question goes through
`MemoryStore.recall` at floor 0, and each candidate's own score (its score before the turn
context moved it: `Recalled.own_score`, else its score) is kept. The candidates are then
re-ranked with `sources.relevance._turn_context.standing` at several weights — none, the neighbours only,
the neighbours and the answer after a question, and the best of the turn's stretch too — and the share of questions with a gold turn
in the first 1, 5 and 10 is printed, overall and conversation by conversation at 10. It reads
the ranking only (the floor and band are not applied): the weights were read from it. Recall is
asked for every candidate the store finds (`DEPTH`), where a turn's recall re-ranks the best
few dozen of each retrieval: a question turn outside those raises no answer in a real turn, so
the judged harness, not this one, measures what the weights buy a turn.

    python -m benchmarks.turn_context [--mode lexical|dense|hybrid]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Final

import attrs

from sources import MemoryStore, Recalled
from sources.relevance._relevance import MODES
from sources.relevance._turn_context import NEIGHBOUR_WEIGHT, QUESTION_WEIGHT, WEIGHTS, asks, standing

from . import _locomo

KS: Final = (1, 5, 10)
DEPTH: Final = 1000
VARIANTS: Final = (
    ("own words only", (0.0, 0.0, 0.0)),
    ("neighbours", (NEIGHBOUR_WEIGHT, 0.0, 0.0)),
    *((f"neighbours + answer after a question {q}", (NEIGHBOUR_WEIGHT, q, 0.0)) for q in (0.25, 0.5, 1.0)),
    *((f"... + the stretch's best {w}", (NEIGHBOUR_WEIGHT, QUESTION_WEIGHT, w)) for w in (0.25, 0.75, 1.0)),
    ("as shipped", WEIGHTS),
)


@attrs.frozen
class Asked:
    """One question's candidates: (rowid, own score, asks a question, memory id), and the ids
    of its gold turns."""

    conversation: int
    candidates: tuple[tuple[int, float, bool, str], ...]
    gold: frozenset[str]


def collect(mode: str) -> list[Asked]:
    """Every answerable dev question's candidates at floor 0, with their own scores."""
    out: list[Asked] = []
    with tempfile.TemporaryDirectory() as tmp, MemoryStore.open(Path(tmp) / "t.db", mode=mode) as store:
        for ci, conv in enumerate(_locomo.load()):
            store.add_entries(conv.entries(), namespace=conv.namespace, replace=True)
            for q in conv.questions():
                found = store.recall(q.text, namespace=conv.namespace, min_score=0.0, limit=DEPTH)
                cands = tuple(
                    (
                        _rowid(r),
                        r.score if r.own_score is None else r.own_score,
                        asks(r.memory.text),
                        r.memory.id,
                    )
                    for r in found
                )
                out.append(Asked(ci, cands, frozenset(q.evidence)))
    return out


def _rowid(recalled: Recalled) -> int:
    """A recalled entry's rowid (every entry recall carries one)."""
    if recalled.rowid is None:
        msg = f"{recalled.memory.id}: recalled without its rowid"
        raise RuntimeError(msg)
    return recalled.rowid


def ranked(asked: Asked, weights: tuple[float, float, float]) -> list[str]:
    """The candidates' ids, best first, re-ranked with `weights`."""
    cands = asked.candidates
    keys = standing(
        [c[1] for c in cands], [c[0] for c in cands], [True] * len(cands), [c[2] for c in cands], weights
    )
    return [cands[i][3] for i in sorted(range(len(cands)), key=lambda i: -keys[i])]


def hits(asked: list[Asked], weights: tuple[float, float, float], k: int) -> float:
    """Share of the questions with a gold turn among the first k."""
    return sum(1 for a in asked if a.gold & set(ranked(a, weights)[:k])) / max(len(asked), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=MODES, default="hybrid")
    args = parser.parse_args(argv)
    _locomo.require_data()
    asked = collect(args.mode)
    convs = sorted({a.conversation for a in asked})
    print(f"{args.mode}: {len(asked)} answerable questions, {len(convs)} conversations, floor 0")
    for name, weights in VARIANTS:
        overall = "  ".join(f"@{k} {hits(asked, weights, k):.3f}" for k in KS)
        each = " ".join(f"{hits([a for a in asked if a.conversation == c], weights, 10):.3f}" for c in convs)
        print(f"{name:<42} {overall}   @10 by conversation: {each}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
