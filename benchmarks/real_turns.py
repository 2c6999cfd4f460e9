"""Turns that select memories, on real conversations: select_for_task p50 / p99, one at a time.

    python -m benchmarks.real_turns [--mode lexical|hybrid|all] [--repeats 3] [--profile FILE]

Workload: the LoCoMo dev conversations (read from ../shared, never shipped; skipped with a
message without them), one tenant each, every turn an episodic memory (about 600 a namespace),
embedded at ingest in hybrid. Each answerable question (categories 1-4) is a turn against its
own conversation, through the real selector over the eight default sources at the command
line's budget (20 memories) under a 1 s deadline (so no source is cut and every turn is
measured whole), one after another, `--repeats` passes in a shuffled order after one warm-up
pass. Reported: the share of turns whose gate opens (memories selected), the mean memories
selected, and p50 / p99 of the gate-open turns (the headline) and of all turns. No answer is
kept across turns (each does the whole work). `--profile FILE` writes a cProfile of one pass of
the gate-open turns (read with `python -m pstats FILE`).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from broker import DEFAULT_SELECT_BUDGET, MemorySelector, open_selector
from sources import MemoryStore, default_sources

from . import _locomo, _machine
from ._measure import pct

DEADLINE = 1.0
MODES = ("lexical", "hybrid")


async def _turns(
    selector: MemorySelector, tasks: list[tuple[_locomo.Question, Any]]
) -> list[tuple[float, int]]:
    """(milliseconds, memories selected) of each task, in order."""
    out = []
    for question, namespace in tasks:
        start = time.perf_counter()
        result = await selector.select_for_task(
            question.text, namespace=namespace, budget=DEFAULT_SELECT_BUDGET
        )
        out.append(((time.perf_counter() - start) * 1000, len(result.blocks)))
    return out


async def measure(
    store: MemoryStore,
    convs: list[_locomo.Conversation],
    mode: str,
    repeats: int,
    profile: Path | None = None,
) -> dict[str, Any]:
    """One mode's figures over every answerable question of `convs`, stored in `store`."""
    tasks = [(q, c.namespace) for c in convs for q in c.questions()]
    async with open_selector(
        default_sources(store, result_cache=0), deadline=DEADLINE, mode=mode, breaker_threshold=10**6
    ) as selector:
        warm = await _turns(selector, tasks)
        open_tasks = [t for t, (_, n) in zip(tasks, warm, strict=True) if n]
        times, opened, selected = [], [], []
        rng = random.Random(7)
        for _ in range(repeats):
            order = list(range(len(tasks)))
            rng.shuffle(order)
            for ms, n in await _turns(selector, [tasks[i] for i in order]):
                times.append(ms)
                selected.append(n)
                if n:
                    opened.append(ms)
        if profile is not None:
            with cProfile.Profile() as prof:
                await _turns(selector, open_tasks)
            prof.dump_stats(str(profile))
    return {
        "mode": mode,
        "turns": len(times),
        "gate_open_share": round(len(opened) / len(times), 4),
        "mean_selected": round(sum(selected) / len(selected), 2),
        "gate_open_ms": pct(opened),
        "all_ms": pct(times),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=(*MODES, "all"), default="all")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--profile", type=Path, help="cProfile of one pass of the gate-open turns (last mode)"
    )
    args = parser.parse_args(argv)
    _locomo.require_data()
    print(f"machine: {_machine.cpu_model()}, {os.cpu_count()} cores, load {_machine.load_average()}")
    for mode in MODES if args.mode == "all" else (args.mode,):
        with tempfile.TemporaryDirectory() as tmp:
            store = MemoryStore.open(Path(tmp) / "locomo.db", mode=mode)
            try:
                convs = _locomo.load()
                for c in convs:
                    store.add_entries(c.entries(), namespace=c.namespace, replace=True)
                r = anyio.run(measure, store, convs, mode, args.repeats, args.profile, backend="trio")
            finally:
                store.close()
        g, a = r["gate_open_ms"], r["all_ms"]
        print(
            f"{mode:7s} gate-open turns p50 {g['p50']:.2f} ms  p99 {g['p99']:.2f} ms "
            f"(share {r['gate_open_share']:.3f} of {r['turns']} turns, {r['mean_selected']:.1f} memories selected a turn); "
            f"all turns p50 {a['p50']:.2f} p99 {a['p99']:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
