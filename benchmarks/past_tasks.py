"""Past tasks on their own evidence (benchmarks/data/past_tasks.json, our own writing): which
completed task a follow-up brings back, and which it must not.

Four namespaces (a payments team, a mobile team, a data team, a household), twelve completed
tasks each, and the tasks an agent receives next: follow-ups that continue or repeat one
completed task (literally, "Do the same Postgres 16 migration for the invoicing service", or in
other words, "Upgrade invoicing's database like we did for billing"), new work of the same team
that continues none though it shares their words ("Write a runbook for the billing service
on-call"), and small talk. The `fit` namespaces are the ones the rule was chosen on; `held_out`
were not looked at while choosing it.

Each task goes through the past-task source (the shipped one, at the one floor) in each mode.
Prints, per split and mode: follow-ups that get the task they continue, past tasks injected
that a follow-up does not continue, new tasks that get any past task, and small-talk turns that
get any.

    python -m benchmarks.past_tasks [--mode lexical|dense|hybrid|all]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any, Final

import anyio
import attrs

from broker import Namespace
from broker.abc import SourceRequest
from sources import MemoryStore, PastTaskSource, SqliteTaskRepository, StoreReader
from sources.relevance._relevance import MODES

DATA: Final = Path(__file__).parent / "data" / "past_tasks.json"
SPLITS: Final = ("fit", "held_out")


@attrs.frozen(kw_only=True)
class Figures:
    """One split in one mode."""

    follow_ups: int
    served: int
    wrong_on_follow_ups: int
    new: int
    new_given_any: int
    trivial: int
    trivial_given_any: int

    def line(self) -> str:
        return (
            f"follow-ups served {self.served}/{self.follow_ups}  "
            f"other past tasks on them {self.wrong_on_follow_ups}  "
            f"new tasks given one {self.new_given_any}/{self.new}  "
            f"small talk given one {self.trivial_given_any}/{self.trivial}"
        )


def load() -> dict[str, Any]:
    """The set."""
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


async def _team(team: str, data: dict[str, Any], trivial: list[str], mode: str, tmp: Path) -> Figures:
    ns = Namespace(tenant_id=team, project_id="tasks")
    store = await anyio.to_thread.run_sync(lambda: MemoryStore.open(tmp / f"{team}.db", mode=mode))
    try:
        repo = SqliteTaskRepository.from_store(store)
        for task_id, text in data["past"].items():
            repo.create_task(text, namespace=ns, task_id=task_id)
            repo.set_status(task_id, "completed", namespace=ns)
        source = PastTaskSource(StoreReader(store=store))

        async def given(task: str) -> set[str]:
            got = await source.fetch(SourceRequest(task=task, namespace=ns, mode=mode))
            return {c.entry_id for c in got}

        served = wrong = new_any = trivial_any = 0
        for task, gold in data["follow"]:
            ids = await given(task)
            served += gold in ids
            wrong += len(ids - {gold})
        for task in data["new"]:
            new_any += bool(await given(task))
        for task in trivial:
            trivial_any += bool(await given(task))
    finally:
        store.close()
    return Figures(
        follow_ups=len(data["follow"]),
        served=served,
        wrong_on_follow_ups=wrong,
        new=len(data["new"]),
        new_given_any=new_any,
        trivial=len(trivial),
        trivial_given_any=trivial_any,
    )


async def evaluate(data: dict[str, Any], split: str, mode: str) -> Figures:
    """Every task of the split's namespaces through the past-task source in `mode`."""
    total = Figures(
        follow_ups=0, served=0, wrong_on_follow_ups=0, new=0, new_given_any=0, trivial=0, trivial_given_any=0
    )
    with tempfile.TemporaryDirectory() as tmp:
        for team in data[split]:
            one = await _team(team, data["teams"][team], data["trivial"], mode, Path(tmp))
            total = Figures(**{k: v + getattr(one, k) for k, v in attrs.asdict(total).items()})
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=(*MODES, "all"), default="all")
    args = parser.parse_args(argv)
    data = load()
    for mode in MODES if args.mode == "all" else (args.mode,):
        for split in SPLITS:
            figures = anyio.run(evaluate, data, split, mode, backend="trio")
            print(f"past-tasks {split:8s} {mode:7s} {figures.line()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
