"""One turn at a time on a synthetic store: select_for_task p50 / p99 and CPU a turn.

    python -m benchmarks.turn_cost [--n 100000] [--mode lexical|hybrid] [--turns 200] [--db DIR]
                                   [--repeats N] [--gate open|closed]

Builds the latency run's synthetic corpus (`benchmarks._synthetic`: real memories first, the
LoCoMo dev turns when `../shared` is there, else our own sets' facts, then synthetic ones with
recycled real embeddings in hybrid) once into `--db` and reuses it (the file is named by the
corpus version and its real memories' source, so a store of another corpus is never reused), opens the default sources keeping no
answers across turns (every turn does the full work), and runs the tasks one after another
under a 1 s deadline (so no source is cut and every turn is measured whole). CPU a turn is the
process's CPU time over the turns (ONNX and BLAS threads included) divided by the turns.
`--gate open` (or `closed`) keeps only the drawn tasks whose gate reaches (or misses) the floor
(`benchmarks._latency.gates`): a gate-open turn is the one whose sources read and score (in the
full run at 100k, 46 % of the turns lexical and 25 % hybrid).

To compare two versions of the code side by side, run this against each checkout on the same
store, alternating them: `cd /tmp && PYTHONPATH=/path/to/checkout python -m
benchmarks.turn_cost ...` (it only uses APIs both have). Run it from outside every checkout:
`python -m` puts the current directory first on the path, ahead of `PYTHONPATH`. A fifth of the tasks are trivial ones, read from the dev data
beside the checkout when it is there (else a built-in few): set `CONTEXT_BROKER_SHARED` to one
directory so every checkout answers the same tasks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from benchmarks import _synthetic
from benchmarks._latency import gates
from benchmarks._synthetic import NS
from broker import open_selector
from sources import MemoryStore, default_sources
from sources.embedding._embedder import load_default_embedder

POOL = 1000  # real embeddings recycled for the stored vectors (as in the latency run)
SEED = 7
CORPUS_VERSION = 2
"""Named in the stored corpus's file: 2 stores real memories first (1: synthetic words only)."""


def build_store(path: Path, n: int, *, vectors: bool) -> None:
    """Build the synthetic store at `path` unless it is there."""
    if path.exists():
        return
    gen = _synthetic.Generator(seed=SEED)
    texts = [gen.memory() for _ in range(POOL)]  # drawn either way: the same corpus in both modes
    capacity = _synthetic.split(n)["store"]
    model = ""
    if vectors:
        embedder = load_default_embedder()
        real = _synthetic.real_pool(embedder.embed, embedder.embed(texts)).at(capacity)
        stored, pool, model = real.stored, real.vectors, embedder.model_id
    else:  # a lexical store needs no embedding
        stored, pool = _synthetic.real_at(capacity)[0], None
    built = _synthetic.build(path, n, gen, texts=stored, pool=pool, model_id=model)
    print(f"built {n} in {built.seconds:.1f} s (+{built.vector_seconds:.1f} s vectors)")


def open_bench_store(db: Path, n: int, mode: str) -> MemoryStore:
    """The synthetic store of `n` memories for `mode` kept in `db` (built the first time), open."""
    real = "locomo" if _synthetic.real_groups()[0] == _synthetic.LOCOMO_SOURCE else "own"
    path = db / f"turn-cost-v{CORPUS_VERSION}-{real}-{n}-{'vec' if mode != 'lexical' else 'lex'}.db"
    build_store(path, n, vectors=mode != "lexical")
    return MemoryStore.open(path, embedder=load_default_embedder() if mode != "lexical" else None, mode=mode)


def bench_tasks(turns: int, n: int) -> list[str]:
    """The measured tasks of the store of `n` memories (the same every run): the real questions
    its real memories answer (`_synthetic.real_pool`) and trivial tasks."""
    _memories, answerable = _synthetic.real_at(_synthetic.split(n)["store"])
    return [t for t, _ in _synthetic.Generator(seed=11).tasks(turns, _synthetic.trivial_tasks(), answerable)]


async def _turns(store: MemoryStore, mode: str, tasks: list[str]) -> tuple[list[float], float]:
    async with open_selector(default_sources(store, result_cache=0), mode=mode, deadline=1.0) as sel:
        for task in tasks[:5]:  # warm the path
            await sel.select_for_task(task, namespace=NS, budget=10)
        ms, cpu = [], time.process_time()
        for task in tasks:
            started = time.perf_counter()
            await sel.select_for_task(task, namespace=NS, budget=10)
            ms.append(1000 * (time.perf_counter() - started))
        return ms, 1000 * (time.process_time() - cpu) / len(tasks)


async def _repeats(store: MemoryStore, mode: str, tasks: list[str], repeats: int) -> list[float]:
    """Each task asked once (cold for the kept answers), then `repeats` times more: the repeats' ms."""
    async with open_selector(default_sources(store), mode=mode, deadline=1.0) as sel:
        again: list[float] = []
        for task in tasks:
            await sel.select_for_task(task, namespace=NS, budget=10)
            for _ in range(repeats):
                started = time.perf_counter()
                await sel.select_for_task(task, namespace=NS, budget=10)
                again.append(1000 * (time.perf_counter() - started))
        return again


def _p99(ms: list[float]) -> float:
    ms = sorted(ms)
    return ms[max(0, int(0.99 * len(ms)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--mode", choices=("lexical", "hybrid"), default="lexical")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument(
        "--repeats", type=int, default=0, help="also ask 20 tasks again N times each, answers kept (0: skip)"
    )
    parser.add_argument(
        "--db", default=os.environ.get("BENCH_TMP", tempfile.gettempdir()), help="where stores are kept"
    )
    parser.add_argument("--gate", choices=("open", "closed"), help="keep only the tasks whose gate is so")
    args = parser.parse_args()
    store = open_bench_store(Path(args.db), args.n, args.mode)
    tasks = bench_tasks(args.turns, args.n)
    if args.gate is not None:
        opened = gates(store, tasks, args.mode)
        tasks = [t for t, o in zip(tasks, opened, strict=True) if o == (args.gate == "open")]
        if len(tasks) < 6:
            parser.exit(
                2,
                f"turn_cost: only {len(tasks)} of {args.turns} tasks have their gate {args.gate}; ask more --turns\n",
            )
        print(f"{len(tasks)} of {args.turns} tasks have their gate {args.gate}")
    try:
        ms, cpu = anyio.run(_turns, store, args.mode, tasks, backend="trio")
        again = anyio.run(_repeats, store, args.mode, tasks[:20], args.repeats, backend="trio")
    finally:
        store.close()
    print(
        f"{args.mode} n={args.n}: p50 {statistics.median(ms):.1f} ms, p99 {_p99(ms):.1f} ms, "
        f"cpu {cpu:.1f} ms a turn"
    )
    if again:
        print(f"  repeated ({len(again)}): p50 {statistics.median(again):.2f} ms, p99 {_p99(again):.2f} ms")


if __name__ == "__main__":
    main()
