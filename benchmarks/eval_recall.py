"""Recall quality of the store on the LoCoMo dev conversations, at the one floor.

    python -m benchmarks.eval_recall [--limit 40] [--floor 0.42] [--curve]
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs

from broker import RECALL_MIN_SCORE
from sources import MemoryStore

from . import _locomo

Recall = Callable[[str, _locomo.Conversation], list[str]]


@attrs.frozen(kw_only=True)
class Quality:
    """Figures of one configuration."""

    answerable: int
    hit_rate: float  # share of answerable questions with >= 1 gold turn selected
    evidence_recall: float  # share of gold evidence turns selected, over all answerable questions
    false_abstention: float
    trivial_abstention: float
    foreign_abstention: float
    mean_selected: float

    def line(self) -> str:
        return (
            f"hit@sel {self.hit_rate:.3f}  evidence recall {self.evidence_recall:.3f}  "
            f"false abstention {self.false_abstention:.3f}  trivial abstention {self.trivial_abstention:.3f}  "
            f"foreign abstention {self.foreign_abstention:.3f}  mean selected {self.mean_selected:.1f}  "
            f"(n={self.answerable})"
        )


def measure(convs: list[_locomo.Conversation], recall: Recall) -> Quality:
    """Run every question, trivial task and foreign question through `recall`."""
    hits = abstain = total = 0
    ev_hit = ev_total = 0
    selected = 0
    for c in convs:
        for q in c.questions():
            got = set(recall(q.text, c))
            total += 1
            selected += len(got)
            abstain += not got
            hits += bool(got & q.evidence)
            ev_hit += len(got & q.evidence)
            ev_total += len(q.evidence)
    trivial = [t for t in _locomo.trivial_tasks()]
    trivial_abst = sum(not recall(t, c) for c in convs for t in trivial) / (len(trivial) * len(convs))
    foreign = [(q, f) for owner, f in _locomo.foreign_pairs(convs) for q in owner.questions()]
    foreign_abst = sum(not recall(q.text, f) for q, f in foreign) / len(foreign)
    return Quality(
        answerable=total,
        hit_rate=hits / total,
        evidence_recall=ev_hit / ev_total,
        false_abstention=abstain / total,
        trivial_abstention=trivial_abst,
        foreign_abstention=foreign_abst,
        mean_selected=selected / total,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--floor", type=float, default=RECALL_MIN_SCORE)
    parser.add_argument("--curve", action="store_true", help="also print the trade-off over floors")
    args = parser.parse_args(argv)
    _locomo.require_data()
    convs = _locomo.load()
    with tempfile.TemporaryDirectory() as tmp:
        store = _locomo.build_store(Path(tmp) / "dev.db", convs)
        floors = [args.floor] if not args.curve else [0.05, 0.1, 0.2, 0.3, 0.42, 0.5, 0.6, 0.7, 0.8]
        for floor in floors:

            def recall(text: str, c: _locomo.Conversation, floor: float = floor) -> list[str]:
                hits = store.recall(text, namespace=c.namespace, limit=args.limit, min_score=floor)
                return [r.memory.id for r in hits]

            print(f"lexical floor {floor:.2f}: {measure(convs, recall).line()}")
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
