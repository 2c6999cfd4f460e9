"""How far down the store's ranking each task's evidence lies, on our own task-style and
personal sets: what bounds any floor's precision.

Every fact of a set is stored as a semantic memory; each answerable task goes through
`MemoryStore.recall` with the floor at 0, and the rank of its first right fact is read. hit@k
is the share of tasks whose right fact stands in the first k. Printed per set and mode: hit@1,
2, 3, 5, 10, 20; for a share s of 0.90 and 0.95 (the task-style and personal targets of issue
44), the smallest fixed depth k with hit@k >= s (injecting k a task, one memory in k at most is
the task's), and an oracle's memories a task: a floor that knew where each task's fact stands,
served the s of the tasks whose facts stand highest and stopped at each fact (no floor reading
scores does as well). A score floor lands between the two.

    python -m benchmarks.ranking [--set agent-dev|agent-test|personal-dev|personal-test|all]
                                 [--mode lexical|dense|hybrid|all]
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any, Final

from broker import Namespace
from sources import MemoryStore, NewEntry

from . import _sets, agent_tasks, personal

KS: Final = (1, 2, 3, 5, 10, 20)
DEPTH: Final = 60
SETS: Final = ("agent-dev", "agent-test", "personal-dev", "personal-test")
TARGETS: Final = (0.90, 0.95)
NS: Final = Namespace(tenant_id="ranking")


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
            store.add_entries(entries, namespace=NS)
            out: list[int | None] = []
            for task, gold in data["questions"]:
                wanted = {gold} if isinstance(gold, str) else set(gold)
                got = store.recall(task, namespace=NS, min_score=0.0, limit=DEPTH)
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


def oracle_injected(ranks: list[int | None], share: float) -> float | None:
    """Memories a task (over every task) injected by a floor that serves the `share` of the
    tasks whose facts rank highest and stops at each one's fact; None if fewer are found."""
    needed = math.ceil(share * len(ranks) - 1e-9)
    found = sorted(r for r in ranks if r is not None)
    if needed > len(found):
        return None
    return sum(r + 1 for r in found[:needed]) / max(len(ranks), 1)


def line(name: str, mode: str, ranks: list[int | None]) -> str:
    """One set and mode: hit@k, then per target share the fixed depth and the oracle's memories."""
    hits = "  ".join(f"@{k} {hit_at(ranks, k):.3f}" for k in KS)
    needs = "  ".join(_needs(ranks, s) for s in TARGETS)
    return f"{name:<14} {mode:<8} {hits}  {needs}  (n={len(ranks)})"


def _needs(ranks: list[int | None], share: float) -> str:
    k, oracle = smallest_k(ranks, share), oracle_injected(ranks, share)
    depth = k if k is not None else f">{DEPTH}"
    stops = f"{oracle:.1f}" if oracle is not None else "-"
    return f"{share:.2f}: depth {depth}, oracle {stops}/task"


def main(argv: list[str] | None = None) -> int:
    sets, modes = _sets.chosen(__doc__, SETS, argv)
    for name in sets:
        data = load(name)
        for mode in modes:
            print(line(name, mode, gold_ranks(data, mode)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
