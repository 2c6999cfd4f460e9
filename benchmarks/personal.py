"""The personal-assistant sets (benchmarks/data/personal_*.json, our own writing): one person's
short facts in one tenant, natural questions each served by one fact (mostly without its
words), and trivial tasks of the set's own.

`dev` is fitted on (benchmarks/fit_calibration.py); `test` never is: its figures are held out.
Every fact is stored as a semantic memory; each question and trivial task goes through the
real selector over every default source (budget 40, as the held-out harness asks).

Prints, per set and mode: right fact selected (hit), false abstention, trivial abstention,
mean memories and tokens injected on questions, and the share of injected memories that are
not the question's fact.

    python -m benchmarks.personal [--set dev|test|all] [--mode lexical|dense|hybrid|all]
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Final

import anyio
import attrs

from broker import EstimatingTokenCounter, Namespace, open_selector
from sources import MemoryStore, NewEntry, default_sources
from sources.relevance._relevance import MODES

from . import _locomo, _sets

DATA: Final = Path(__file__).parent / "data"
SETS: Final = ("dev", "test")
BUDGET: Final = 40
DEADLINE: Final = 2.0
ME: Final = Namespace(tenant_id="me")


@attrs.frozen(kw_only=True)
class Figures:
    """One set in one mode."""

    questions: int
    hit: float
    false_abstention: float
    trivial_abstention: float
    mean_injected: float
    mean_tokens: float
    off_evidence: float
    shared_trivial_abstention: float | None = None

    def line(self) -> str:
        return (
            f"hit {self.hit:.3f}  false abstention {self.false_abstention:.3f}  "
            f"trivial abstention {self.trivial_abstention:.3f}  injected {self.mean_injected:.1f} "
            f"({self.mean_tokens:.0f} tokens)  not the fact {self.off_evidence:.3f}  (n={self.questions})"
            + (
                ""
                if self.shared_trivial_abstention is None
                else f"  shared trivial abstention {self.shared_trivial_abstention:.3f}"
            )
        )


def load(name: str) -> dict[str, Any]:
    """One personal set."""
    data: dict[str, Any] = json.loads((DATA / f"personal_{name}.json").read_text(encoding="utf-8"))
    return data


async def evaluate(data: dict[str, Any], mode: str) -> Figures:
    """Run every question and trivial task of a set through the selector in `mode`."""
    counter = EstimatingTokenCounter()
    with tempfile.TemporaryDirectory() as tmp:
        store = await anyio.to_thread.run_sync(lambda: MemoryStore.open(Path(tmp) / "p.db", mode=mode))
        try:
            entries = [NewEntry(id=k, text=v, memory_type="semantic") for k, v in data["facts"].items()]
            store.add_entries(entries, namespace=ME)
            async with open_selector(
                default_sources(store), deadline=DEADLINE, mode=mode, breaker_threshold=10**6
            ) as selector:
                hits = abstained = injected = tokens = off = 0
                for question, fact in data["questions"]:
                    r = await selector.select_for_task(question, namespace=ME, budget=BUDGET)
                    ids = [b.entry_id for b in r.blocks]
                    hits += fact in ids
                    abstained += not ids
                    injected += len(ids)
                    tokens += sum(counter.count(b.text) for b in r.blocks)
                    off += sum(1 for i in ids if i != fact)
                quiet = 0
                for task in data["trivial"]:
                    quiet += (await selector.select_for_task(task, namespace=ME, budget=BUDGET)).abstained
                shared = 0
                for task in _shared_trivial():
                    shared += (await selector.select_for_task(task, namespace=ME, budget=BUDGET)).abstained
        finally:
            store.close()
    n = len(data["questions"])
    return Figures(
        questions=n,
        hit=hits / n,
        false_abstention=abstained / n,
        trivial_abstention=quiet / len(data["trivial"]),
        mean_injected=injected / n,
        mean_tokens=tokens / n,
        off_evidence=off / injected if injected else 0.0,
        shared_trivial_abstention=shared / len(_shared_trivial()) if _shared_trivial() else None,
    )


def _shared_trivial() -> list[str]:
    """The held-out trivial tasks of ../shared, asked of the personal store too (none without them)."""
    return _locomo.trivial_tasks() if _locomo.TRIVIAL.exists() else []


def run(sets: tuple[str, ...] = SETS, modes: tuple[str, ...] = MODES) -> _sets.Figures:
    """Figures of every set in every mode, as plain dicts (set -> mode -> figure -> value)."""
    return _sets.run_sets(load, evaluate, sets, modes)


def main(argv: list[str] | None = None) -> int:
    sets, modes = _sets.chosen(__doc__, SETS, argv)
    for name, by_mode in run(sets, modes).items():
        for mode, figures in by_mode.items():
            print(f"personal-{name} {mode:7s} {Figures(**figures).line()}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
