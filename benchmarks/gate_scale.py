"""The gate as a namespace grows past the sizes it was fitted on.

    python -m benchmarks.gate_scale [--mode lexical|dense|hybrid]

Workload: the five LoCoMo dev conversations (read from ../shared, never shipped; skipped with a
message without them) written one after another into one namespace, every turn an episodic
memory (ids prefixed by the conversation): 419 turns after the first, 2,760 after the fifth.
After each conversation is added, the first conversation's answerable questions (categories 1-4)
are recalled at the floor: the share served (any memory above it) and the share whose gold turn
is among the first 10. With all five stored, every conversation's questions are asked (served),
and so are the trivial tasks (../shared) and the questions of our own task-style and personal
sets (benchmarks/data; foreign to the conversations), which must abstain.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from broker import Namespace
from sources import MemoryStore, NewEntry
from sources.relevance._relevance import MODES

from . import _locomo
from ._synthetic import DATA, REAL_SETS

NS = Namespace(tenant_id="gate-scale")

FIRST = 80
"""The first conversation's questions asked after each addition."""


def foreign_tasks() -> list[str]:
    """Our own sets' questions: about a team's systems and two people, never the conversations."""
    out: list[str] = []
    for name in REAL_SETS:
        out += [
            q for q, _gold in json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))["questions"]
        ]
    return out


def _served(store: MemoryStore, tasks: list[str]) -> float:
    return sum(1 for t in tasks if store.recall(t, namespace=NS, limit=10)) / len(tasks)


def run(mode: str) -> None:
    convs = _locomo.load()
    first = convs[0]
    asked = first.questions()[:FIRST]
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore.open(Path(tmp) / "g.db", mode=mode)
        try:
            held = 0
            for conv in convs:
                entries = [
                    NewEntry(
                        id=f"{conv.sample_id}:{e.id}", text=e.text, kind="message", memory_type="episodic"
                    )
                    for e in conv.entries()
                ]
                held += len(store.add_entries(entries, namespace=NS))
                gold = 0
                for q in asked:
                    ids = {r.memory.id for r in store.recall(q.text, namespace=NS, limit=10)}
                    gold += any(f"{first.sample_id}:{e}" in ids for e in q.evidence)
                print(
                    f"{mode} {held:5d} turns: conversation 1 served {_served(store, [q.text for q in asked]):.3f}, "
                    f"gold among the first 10 {gold / len(asked):.3f} (n={len(asked)})",
                    flush=True,
                )
            every = [q.text for c in convs for q in c.questions()]
            print(
                f"{mode} {held:5d} turns: every conversation served {_served(store, every):.3f} (n={len(every)}), "
                f"trivial abstention {1 - _served(store, _locomo.trivial_tasks()):.3f}, "
                f"foreign abstention {1 - _served(store, foreign_tasks()):.3f} (n={len(foreign_tasks())})"
            )
        finally:
            store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=MODES, default="hybrid")
    args = parser.parse_args(argv)
    _locomo.require_data()
    run(args.mode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
