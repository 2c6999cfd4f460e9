"""The task-style sets (benchmarks/data/agent_*.json, our own writing): a coding agent's facts
about a team's systems and its user in one tenant, tasks phrased as an agent receives them
(instructions as well as questions, each served by one or two facts, most without their words),
and trivial and foreign tasks that must get nothing.

`dev` is fitted on in lexical mode (benchmarks/fit_calibration.py; its literal tasks); `test`
(another team in another domain) never is: its figures are held out. Every fact is stored as a semantic memory; each task goes
through the real selector over every default source at the command line's default budget (10
memories, as `../shared/tools/agent_eval.py` asks).

Prints, per set and mode: right fact selected (hit), false abstention, trivial and foreign
abstention, memories and tokens injected per answerable task, the share of injected memories
that the task needs (gold share), and how many of the literal-match tasks (those sharing a
distinctive term with their fact) are served.

    python -m benchmarks.agent_tasks [--set dev|test|all] [--mode lexical|dense|hybrid|all]
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Final

import anyio
import attrs

from broker import EstimatingTokenCounter, MemorySelector, Namespace, open_selector
from sources import MemoryStore, NewEntry, default_sources
from sources.relevance._relevance import MODES

from . import _sets

DATA: Final = Path(__file__).parent / "data"
SETS: Final = ("dev", "test")
BUDGET: Final = 10
DEADLINE: Final = 2.0
TEAM: Final = Namespace(tenant_id="team", project_id="shop")


@attrs.frozen(kw_only=True)
class Figures:
    """One set in one mode."""

    tasks: int
    hit: float
    false_abstention: float
    trivial_abstention: float
    foreign_abstention: float
    mean_injected: float
    mean_tokens: float
    gold_share: float
    literal_served: int
    literal: int

    def line(self) -> str:
        return (
            f"hit {self.hit:.3f}  false abstention {self.false_abstention:.3f}  "
            f"trivial {self.trivial_abstention:.3f}  foreign {self.foreign_abstention:.3f}  "
            f"injected {self.mean_injected:.1f} ({self.mean_tokens:.0f} tokens)  "
            f"gold share {self.gold_share:.3f}  literal served {self.literal_served}/{self.literal}  "
            f"(n={self.tasks})"
        )


def load(name: str) -> dict[str, Any]:
    """One task-style set."""
    data: dict[str, Any] = json.loads((DATA / f"agent_{name}.json").read_text(encoding="utf-8"))
    return data


async def _abstentions(selector: MemorySelector, tasks: list[str]) -> float:
    quiet = 0
    for task in tasks:
        quiet += (await selector.select_for_task(task, namespace=TEAM, budget=BUDGET)).abstained
    return quiet / len(tasks) if tasks else 1.0


async def evaluate(data: dict[str, Any], mode: str) -> Figures:
    """Run every task of a set through the selector in `mode`."""
    counter = EstimatingTokenCounter()
    literal = set(data.get("literal", ()))
    with tempfile.TemporaryDirectory() as tmp:
        store = await anyio.to_thread.run_sync(lambda: MemoryStore.open(Path(tmp) / "a.db", mode=mode))
        try:
            entries = [NewEntry(id=k, text=v, memory_type="semantic") for k, v in data["facts"].items()]
            store.add_entries(entries, namespace=TEAM)
            async with open_selector(
                default_sources(store), deadline=DEADLINE, mode=mode, breaker_threshold=10**6
            ) as selector:
                hits = abstained = injected = tokens = gold_in = served = 0
                for i, (task, gold) in enumerate(data["questions"]):
                    r = await selector.select_for_task(task, namespace=TEAM, budget=BUDGET)
                    ids = [b.entry_id for b in r.blocks]
                    hit = bool(set(gold) & set(ids))
                    hits += hit
                    served += hit and i in literal
                    abstained += not ids
                    injected += len(ids)
                    tokens += sum(counter.count(b.text) for b in r.blocks)
                    gold_in += sum(1 for x in ids if x in gold)
                trivial = await _abstentions(selector, data["trivial"])
                foreign = await _abstentions(selector, data["foreign"])
        finally:
            store.close()
    n = len(data["questions"])
    return Figures(
        tasks=n,
        hit=hits / n,
        false_abstention=abstained / n,
        trivial_abstention=trivial,
        foreign_abstention=foreign,
        mean_injected=injected / n,
        mean_tokens=tokens / n,
        gold_share=gold_in / injected if injected else 0.0,
        literal_served=served,
        literal=len(literal),
    )


def run(sets: tuple[str, ...] = SETS, modes: tuple[str, ...] = MODES) -> _sets.Figures:
    """Figures of every set in every mode, as plain dicts (set -> mode -> figure -> value)."""
    return _sets.run_sets(load, evaluate, sets, modes)


def main(argv: list[str] | None = None) -> int:
    sets, modes = _sets.chosen(__doc__, SETS, argv)
    for name, by_mode in run(sets, modes).items():
        for mode, figures in by_mode.items():
            print(f"agent-{name} {mode:7s} {Figures(**figures).line()}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
