"""Recall quality and latency of the store on the LoCoMo dev conversations, in each mode.

Every question (categories 1-4), trivial task and foreign question (one conversation's
questions against the next conversation's tenant) goes through `MemoryStore.recall` once per
mode with the floor at 0; floors are applied afterwards, which selects exactly what recall
with that `min_score` would (recall keeps the `limit` best above the floor). Latency is per
recall call, query embedding included. ECE here is in-sample, over the candidates recall
returns; the leave-one-conversation-out ECE is printed by benchmarks.fit_calibration.

    python -m benchmarks.eval_recall [--mode lexical|dense|hybrid|all] [--limit 40]
                                     [--floor 0.42] [--curve]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import numpy as np

from broker import RECALL_MIN_SCORE
from sources.relevance._relevance import MODES

from . import _locomo, _logit

if TYPE_CHECKING:
    from sources import MemoryStore

CURVE = (0.05, 0.1, 0.2, 0.3, 0.42, 0.5, 0.6, 0.7, 0.8)


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
            f"false abstention {self.false_abstention:.3f}  "
            f"trivial abstention {self.trivial_abstention:.3f}  "
            f"foreign abstention {self.foreign_abstention:.3f}  mean selected {self.mean_selected:.1f}  "
            f"(n={self.answerable})"
        )


Scored = list[tuple[str, float]]


@attrs.frozen(kw_only=True)
class Run:
    """Every recall of one mode at floor 0: (id, score) lists and per-call latency."""

    questions: list[tuple[_locomo.Question, Scored]]
    trivial: list[Scored]
    foreign: list[Scored]
    latency_ms: list[float]

    def at(self, floor: float) -> Quality:
        """Return the figures with `floor` applied."""

        def kept(scored: Scored) -> set[str]:
            return {i for i, s in scored if s >= floor}

        total = len(self.questions)
        got = [(q, kept(s)) for q, s in self.questions]
        ev_total = sum(len(q.evidence) for q, _ in got)
        return Quality(
            answerable=total,
            hit_rate=sum(bool(g & q.evidence) for q, g in got) / total,
            evidence_recall=sum(len(g & q.evidence) for q, g in got) / ev_total,
            false_abstention=sum(not g for _, g in got) / total,
            trivial_abstention=sum(not kept(s) for s in self.trivial) / len(self.trivial),
            foreign_abstention=sum(not kept(s) for s in self.foreign) / len(self.foreign),
            mean_selected=sum(len(g) for _, g in got) / total,
        )

    def ece(self) -> float:
        """In-sample ECE of the returned scores (gold turns positive, foreign turns negative)."""
        p = [s for q, sc in self.questions for _, s in sc] + [s for sc in self.foreign for _, s in sc]
        y = [float(i in q.evidence) for q, sc in self.questions for i, _ in sc] + [
            0.0 for sc in self.foreign for _ in sc
        ]
        return _logit.ece(np.array(p), np.array(y))


def run(store: MemoryStore, convs: list[_locomo.Conversation], mode: str, limit: int) -> Run:
    """Recall every question, trivial task and foreign question in `mode` at floor 0."""
    latency: list[float] = []

    def recall(text: str, c: _locomo.Conversation) -> Scored:
        started = time.perf_counter()
        hits = store.recall(text, namespace=c.namespace, limit=limit, min_score=0.0, mode=mode)
        latency.append((time.perf_counter() - started) * 1000)
        return [(r.memory.id, r.score) for r in hits]

    questions = [(q, recall(q.text, c)) for c in convs for q in c.questions()]
    trivial = [recall(t, c) for c in convs for t in _locomo.trivial_tasks()]
    foreign = [recall(q.text, f) for owner, f in _locomo.foreign_pairs(convs) for q in owner.questions()]
    return Run(questions=questions, trivial=trivial, foreign=foreign, latency_ms=latency)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=(*MODES, "all"), default="all")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--floor", type=float, default=RECALL_MIN_SCORE)
    parser.add_argument("--curve", action="store_true", help="also print the trade-off over floors")
    args = parser.parse_args(argv)
    _locomo.require_data()
    convs = _locomo.load()
    modes = MODES if args.mode == "all" else (args.mode,)
    with tempfile.TemporaryDirectory() as tmp:
        store = _locomo.build_store(Path(tmp) / "dev.db", convs)
        for mode in modes:
            result = run(store, convs, mode, args.limit)
            p50, p99 = np.percentile(result.latency_ms, [50, 99])
            print(
                f"{mode}: ECE (in-sample, returned candidates) {result.ece():.4f}  "
                f"latency p50 {p50:.2f} ms  p99 {p99:.2f} ms  ({len(result.latency_ms)} recalls)"
            )
            for floor in CURVE if args.curve else (args.floor,):
                print(f"  {mode} floor {floor:.2f}: {result.at(floor).line()}")
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
