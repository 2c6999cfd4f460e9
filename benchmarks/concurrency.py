"""Concurrent turns on the synthetic store: turns/s and the share with every source complete.

    python -m benchmarks.concurrency [--n 100000] [--mode lexical|hybrid] [--concurrency 8]
                                     [--turns 300] [--db DIR] [--json]

The throughput measure of `python -m benchmarks` (`benchmarks._latency.concurrent`: the
default deadline and turn limiter, breakers off, no answers kept across turns) on
`turn_cost`'s store (built once into `--db` and reused), one turn at a time first, then
`--concurrency` turns in flight. On a shared machine these figures move between runs: to
compare two versions of the code, run this against each checkout on the same store
(`cd /tmp && PYTHONPATH=/path/to/checkout python -m benchmarks.concurrency ...`), alternating
them, with `CONTEXT_BROKER_SHARED` set so they answer the same tasks (`benchmarks.turn_cost`).
Run it from outside every checkout: `python -m` puts the current directory first on the path,
ahead of `PYTHONPATH`, so from inside one that checkout's code runs whatever `PYTHONPATH` says.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import anyio

from benchmarks import _latency, _synthetic, turn_cost
from broker import open_selector
from sources import MemoryStore


async def _measure(store: MemoryStore, mode: str, tasks: list[str], concurrency: int) -> list[dict[str, Any]]:
    async with open_selector(
        _latency.uncached(store), deadline=_latency.DEADLINE, mode=mode, breaker_threshold=_latency.NO_BREAKER
    ) as selector:
        await _latency.selects(selector, tasks[:5])  # warm the path
        return [await _latency.concurrent(selector, tasks, c) for c in (1, concurrency)]


def run(*, n: int, mode: str, concurrency: int, turns: int, db: Path) -> list[dict[str, Any]]:
    """Build (or reuse) the store and measure one turn at a time, then `concurrency` at once."""
    store = turn_cost.open_bench_store(db, n, mode)
    tasks = turn_cost.bench_tasks(turns, n)
    try:
        store.warm()  # vectors and graphs load here, never inside a measured turn
        store.recall(tasks[0], namespace=_synthetic.NS, mode=mode, min_score=0.0)
        result: list[dict[str, Any]] = anyio.run(_measure, store, mode, tasks, concurrency, backend="trio")
        return result
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--mode", choices=("lexical", "hybrid"), default="lexical")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument(
        "--db", default=os.environ.get("BENCH_TMP", tempfile.gettempdir()), help="where stores are kept"
    )
    parser.add_argument("--json", action="store_true", help="print both levels' full results as JSON")
    args = parser.parse_args()
    if args.n < 1 or args.turns < 1 or args.concurrency < 1:
        parser.error("--n, --turns and --concurrency must be >= 1")
    levels = run(n=args.n, mode=args.mode, concurrency=args.concurrency, turns=args.turns, db=Path(args.db))
    if args.json:
        print(json.dumps(levels, indent=2))
        return
    for level in levels:
        lat = level["latency_ms"]
        print(
            f"{args.mode} n={args.n} concurrent {level['concurrency']}: {level['turns_per_s']} turns/s, "
            f"{level['complete_turns_per_s']} with every source complete "
            f"({level['share_every_source_completed']:.1%}), p50 {lat['p50']} ms, p99 {lat['p99']} ms"
        )


if __name__ == "__main__":
    main()
