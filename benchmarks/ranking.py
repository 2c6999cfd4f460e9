"""How far down the store's ranking each task's evidence lies, on our own task-style and
personal sets: what bounds any floor's precision.

Every fact of a set is stored as a semantic memory; each answerable task goes through
`MemoryStore.recall` with the floor at 0, and the rank of its first right fact is read. hit@k
is the share of tasks whose right fact stands in the first k. A floor that selects evidence
for a share s of the tasks injects, on average, at least about the k where hit@k reaches s
(it cannot know which tasks have their fact first), so the gold share of what it injects is
at most about 1/k there. Printed per set and mode: hit@1, 2, 3, 5, 10, 20, and the smallest k
reaching 0.90 and 0.95 (the task-style and personal targets of issue 44).

    python -m benchmarks.ranking [--set agent-dev|agent-test|personal-dev|personal-test|all]
                                 [--mode lexical|dense|hybrid|all]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any, Final

from sources import MemoryStore, NewEntry
from sources._relevance import MODES

from . import agent_tasks, personal

KS: Final = (1, 2, 3, 5, 10, 20)
DEPTH: Final = 60
SETS: Final = ("agent-dev", "agent-test", "personal-dev", "personal-test")
TARGETS: Final = (0.90, 0.95)


def load(name: str) -> dict[str, Any]:
    """One of our sets by name: its facts and its (task, gold fact ids) pairs."""
    kind, split = name.split("-")
    return agent_tasks.load(split) if kind == "agent" else personal.load(split)


def gold_ranks(data: dict[str, Any], mode: str) -> list[int | None]:
    """Per answerable task, the 0-based rank of its first right fact at floor 0 (None: not
    among the first `DEPTH`)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore.open(Path(tmp) / "r.db", mode=mode)
        try:
            entries = [NewEntry(id=k, text=v, memory_type="semantic") for k, v in data["facts"].items()]
            store.add_entries(entries, namespace=agent_tasks.TEAM)
            out: list[int | None] = []
            for task, gold in data["questions"]:
                wanted = {gold} if isinstance(gold, str) else set(gold)
                got = store.recall(task, namespace=agent_tasks.TEAM, min_score=0.0, limit=DEPTH)
                out.append(next((i for i, r in enumerate(got) if r.memory.id in wanted), None))
        finally:
            store.close()
    return out


def hit_at(ranks: list[int | None], k: int) -> float:
    """Share of tasks whose first right fact stands in the first k."""
    return sum(1 for r in ranks if r is not None and r < k) / max(len(ranks), 1)


def smallest_k(ranks: list[int | None], share: float) -> int | None:
    """The smallest k whose hit@k reaches `share` (None: not within `DEPTH`)."""
    return next((k for k in range(1, DEPTH + 1) if hit_at(ranks, k) >= share), None)


def line(name: str, mode: str, ranks: list[int | None]) -> str:
    hits = "  ".join(f"@{k} {hit_at(ranks, k):.3f}" for k in KS)
    needs = "  ".join(f"k for {s:.2f}: {smallest_k(ranks, s) or f'>{DEPTH}'}" for s in TARGETS)
    return f"{name:<14} {mode:<8} {hits}  {needs}  (n={len(ranks)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--set", choices=(*SETS, "all"), default="all")
    parser.add_argument("--mode", choices=(*MODES, "all"), default="all")
    args = parser.parse_args(argv)
    sets = SETS if args.set == "all" else (args.set,)
    modes = MODES if args.mode == "all" else (args.mode,)
    for name in sets:
        data = load(name)
        for mode in modes:
            print(line(name, mode, gold_ranks(data, mode)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
