"""Every default source's candidates for the benchmark's tasks: a change meant to cost less
must leave them as they were.

    python -m benchmarks.candidates --out FILE [--n 100000] [--mode lexical|hybrid] [--tasks 120]
                                    [--db DIR] [--min-score 0]
    python -m benchmarks.candidates --compare A.json B.json

The first form asks each of the eight default sources (`sources.default_sources`, no answer
kept across asks, each at floor `--min-score`: by default 0, so below-floor candidates are
compared too) for each of `benchmarks.turn_cost`'s tasks on its synthetic store, and writes
[task, source, [[entry id, score], ...]] rows. Run it against two checkouts (`PYTHONPATH=...`,
from outside both, as `-m` puts the current directory ahead of `PYTHONPATH`; the same `--db` and `CONTEXT_BROKER_SHARED`, so both answer the same tasks on the same store),
then compare: it prints the rows that differ and exits 1 if any does (scores compared to 1e-12).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

import anyio

from benchmarks._synthetic import NS
from benchmarks.turn_cost import bench_tasks, open_bench_store
from broker import RECALL_MIN_SCORE
from broker.abc import SourceRequest
from sources import MemoryStore, default_sources

TOLERANCE = 1e-12


async def dump(store: MemoryStore, mode: str, tasks: list[str], min_score: float = 0.0) -> list[list[Any]]:
    """[task, source name, [[entry id, score], ...]] for every task and default source, each
    source returning what reaches `min_score`."""
    sources = default_sources(store, result_cache=0, min_score=min_score)
    for source in sources:
        await source.open()
    rows: list[list[Any]] = []
    try:
        for task in tasks:
            for source in sources:
                found = await source.fetch(SourceRequest(task=task, namespace=NS, limit=10, mode=mode))
                rows.append([task, source.name, [[c.entry_id, c.score] for c in found]])
    finally:
        for source in sources:
            await source.aclose()
    return rows


def differences(a: list[list[Any]], b: list[list[Any]]) -> list[tuple[list[Any], list[Any] | None]]:
    """The rows of `a` that `b` does not match (same task, source, ids in order, scores to 1e-12)."""
    out: list[tuple[list[Any], list[Any] | None]] = []
    for i, row in enumerate(a):
        other = b[i] if i < len(b) else None
        if other is None or not _same(row, other):
            out.append((row, other))
    out.extend((row, None) for row in b[len(a) :])
    return out


def _read(path: Path) -> list[list[Any]]:
    """A dump written by `--out`; ValueError saying what is wrong with the file."""
    try:
        rows: object = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a dump of this tool (not JSON: {exc})") from exc
    well_formed = isinstance(rows, list) and all(
        isinstance(r, list) and len(r) == 3 and isinstance(r[2], list) for r in rows
    )
    if not well_formed:
        raise ValueError(f"{path}: not a dump of this tool (rows of [task, source, candidates])")
    return cast("list[list[Any]]", rows)


def _same(x: list[Any], y: list[Any]) -> bool:
    if x[:2] != y[:2] or len(x[2]) != len(y[2]):
        return False
    return all(
        a_id == b_id and math.isclose(a_score, b_score, rel_tol=0.0, abs_tol=TOLERANCE)
        for (a_id, a_score), (b_id, b_score) in zip(x[2], y[2], strict=True)
    )


def _floor(text: str) -> float:
    """A source floor from the command line, checked before any store is built (a 100k build
    takes a minute): a number in [0, RECALL_MIN_SCORE], as `default_sources` takes."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= RECALL_MIN_SCORE:
        raise argparse.ArgumentTypeError(f"min_score must be in [0, {RECALL_MIN_SCORE}], got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", type=Path, help="write the candidates here")
    what.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two dumps")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--mode", choices=("lexical", "hybrid"), default="lexical")
    parser.add_argument("--tasks", type=int, default=120)
    parser.add_argument(
        "--min-score",
        type=_floor,
        default=0.0,
        help="each source's floor (default 0: every candidate; at most RECALL_MIN_SCORE)",
    )
    parser.add_argument(
        "--db", default=os.environ.get("BENCH_TMP", tempfile.gettempdir()), help="where stores are kept"
    )
    args = parser.parse_args(argv)
    if args.compare:
        try:
            a, b = (_read(p) for p in args.compare)
        except ValueError as exc:
            parser.error(str(exc))
        diff = differences(a, b)
        for row, other in diff[:20]:
            print(f"differs: {row}\n    vs: {other}")
        print(f"{len(a)} rows, {sum(len(r[2]) for r in a)} candidates; {len(diff)} rows differ")
        return 1 if diff else 0
    store = open_bench_store(Path(args.db), args.n, args.mode)
    try:
        rows = anyio.run(
            dump, store, args.mode, bench_tasks(args.tasks, args.n), args.min_score, backend="trio"
        )
    finally:
        store.close()
    args.out.write_text(json.dumps(rows), encoding="utf-8")
    print(f"{len(rows)} rows, {sum(len(r[2]) for r in rows)} candidates -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
