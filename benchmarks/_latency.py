"""Per-turn latency, throughput, overload, writes and the physical floors on synthetic corpora.

Every figure that is compared is measured in the same process and run: `select_for_task` and
`assemble` against the bare SQL (FTS5) and vector searches the sources issue for the same
tasks, so the broker's overhead is a ratio on this machine.

Every turn of those figures does the full work: their sources keep no answers across turns
(`default_sources(result_cache=0)`). The reuse across turns is measured on its own: the same
query asked again on an unchanged namespace (`repeated_query`).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import attrs
import numpy as np

from broker import DEFAULT_MAX_TURNS, RECALL_MIN_SCORE, SourceStatus, Turn, open_broker, open_selector
from sources import MemoryStore, NewEntry, SqliteTaskRepository, _entry_recall, default_sources
from sources.embedding._embedder import load_default_embedder
from sources.relevance import _relevance
from sources.relevance._reference import Indexes, compute_reference
from sources.relevance._scorer import Scorer
from sources.storage import _engine, _matrix, _quantised, _vectors
from sources.storage._vectors import Slot

from . import _synthetic
from ._measure import db_bytes, pct, peak_rss_mb
from ._synthetic import NS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from broker import MemorySelector, SelectionResult
    from broker.abc import Source
    from sources.embedding._embedder import MiniLMEmbedder

DEADLINE: Final = 0.1
"""The selector's default turn deadline (seconds); every turn here runs under it."""
SLACK_MS: Final = 10.0
BUDGET: Final = 10
K: Final = 50  # the depth the store asks each index for at budget 10: max(4 * limit, 50)
PERSONA: Final = ("self", "personality")
_COMPLETE = frozenset((SourceStatus.OK, SourceStatus.EMPTY))
NO_BREAKER: Final = 10**9
"""Circuit breakers off (threshold never reached): every turn asks every source. With the
default breaker a source that misses 3 deadlines in a row is skipped for 30 s, which would
turn a slow source into a fast `open-circuit` status and flatter every figure here."""


@attrs.frozen(kw_only=True)
class Config:
    """Sizes and turn counts of one run."""

    sizes: tuple[int, ...] = (10_000, 100_000)
    large_sizes: tuple[int, ...] = (1_000_000,)
    """Measured lexical + hybrid like `sizes`, but not by the peers and engines runs."""
    lexical_only_sizes: tuple[int, ...] = ()
    turns: int = 300
    throughput_turns: int = 400
    concurrency: tuple[int, ...] = (1, 8, 64)
    repeated_tasks: int = 20
    repeats: int = 10
    pool: int = 1000
    ingest_lines: int = 5000
    single_writes: int = 50
    dense_n: int = 1_000_000
    dense_queries: int = 200
    seed: int = 0


# -- ingest ----------------------------------------------------------------------------------


def ingest(
    tmp: Path, gen: _synthetic.Generator, embedder: MiniLMEmbedder, n: int, singles: int, *, lines: int
) -> tuple[dict[str, Any], _synthetic.Pool]:
    """Batched ingest with real embeddings, then single writes, then `context-broker ingest`'s
    path over a JSONL file; return figures and the pool.

    The pool seeds the big corpora: the real memories (`_synthetic.real_groups`: LoCoMo's turns
    or our sets' facts) with their embeddings (the first entries, which its tasks are answerable
    from), then the `n` synthetic memories' real embeddings, recycled for the other rows.
    """
    path = tmp / "ingest.db"
    store = MemoryStore.open(path, embedder=embedder, mode="hybrid")
    try:
        entries = [NewEntry(id=f"i{i}", text=gen.memory(), kind="note") for i in range(n)]
        seconds = _synthetic.timed(lambda: store.add_entries(entries, namespace=NS))
        with store.db.read() as conn:
            blobs = [
                r[0] for r in conn.execute("SELECT vec FROM vectors WHERE corpus = 0 ORDER BY src_rowid")
            ]
        pool = _synthetic.real_pool(embedder.embed, _vectors.from_blobs(blobs, embedder.dim))
        single = write_ms(store, [gen.memory() for _ in range(singles)], "s")
    finally:
        store.close()
    out = {
        "batched_with_embeddings": {
            "memories": n,
            "seconds": round(seconds, 3),
            "per_s": round(n / seconds, 1),
        },
        "single_write_with_embedding_ms": pct(single),
        "file_with_embeddings": ingest_file(tmp, gen, embedder, lines),
    }
    return out, pool


def ingest_file(tmp: Path, gen: _synthetic.Generator, embedder: MiniLMEmbedder, n: int) -> dict[str, Any]:
    """Lines/s of the CLI's ingest path (read, validate, embed, write) over a JSONL file of notes."""
    from context_broker._cli._ingest import ingest_records, read_records  # noqa: PLC0415 - the composition root

    path = tmp / "ingest.jsonl"
    path.write_text("".join(json.dumps({"text": gen.memory()}) + "\n" for _ in range(n)), encoding="utf-8")
    store = MemoryStore.open(tmp / "ingest-file.db", embedder=embedder, mode="hybrid")
    try:
        started, cpu = time.perf_counter(), time.process_time()
        ingest_records(store, NS, read_records(str(path)))
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        store.close()
    return {
        "lines": n,
        "seconds": round(seconds, 3),
        "lines_per_s": round(n / seconds, 1),
        "lines_per_cpu_s": round(n / cpu, 1),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def single_lexical_writes(path: Path, gen: _synthetic.Generator, n: int) -> dict[str, float]:
    """Single add_entry calls (no embedding) into the big store: FTS and statistics upkeep."""
    store = MemoryStore.open(path, mode="lexical")
    try:
        ms = write_ms(store, [gen.memory() for _ in range(n)], "w")
    finally:
        store.close()
    return pct(ms)


def write_ms(store: MemoryStore, texts: Sequence[str], prefix: str) -> list[float]:
    """Milliseconds of one add_entry call per text (embedding included when the store embeds)."""
    out = []
    for i, text in enumerate(texts):
        started = time.perf_counter()
        store.add_entry(text, namespace=NS, id=f"{prefix}{i}")
        out.append(1000 * (time.perf_counter() - started))
    return out


# -- floors ----------------------------------------------------------------------------------


def floors(store: MemoryStore, tasks: Sequence[str], *, dense: bool) -> list[float]:
    """Per task, the bare queries the sources issue, summed (ms).

    Lexical: the store's entry FTS5 query (`_entry_recall.lexical_rows`, untyped and persona-typed) and the
    facts and knowledge FTS5 searches. Dense: plus embedding the task once and the two exact
    vector searches (untyped and persona-typed) of the entries.
    """
    out: list[float] = []
    vindex = store.vindex
    with store.db.read() as conn:
        ns_id = conn.namespace_id(NS)
        assert ns_id is not None  # noqa: S101 - the corpus was written
        for task in tasks:
            prof = _relevance.profile(conn, ns_id, task)
            started = time.perf_counter()
            if prof.present:
                terms = sorted(prof.present)
                _entry_recall.lexical_rows(conn, ns_id, prof, None, K)
                _entry_recall.lexical_rows(conn, ns_id, prof, PERSONA, K)
                conn.lexical_candidates(ns_id, terms, corpus=_engine.CORPUS_FACTS, limit=K)
                conn.lexical_candidates(ns_id, terms, corpus=_engine.CORPUS_KNOWLEDGE, limit=K)
            if dense and store.embedder is not None and vindex is not None and prof.terms:
                q = store.embedder.embed([task])[0]
                vindex.search(conn, Slot(ns_id, _engine.CORPUS_ENTRIES), q, K)
                vindex.search(conn, Slot(ns_id, _engine.CORPUS_ENTRIES), q, K, types=PERSONA)
            out.append(1000 * (time.perf_counter() - started))
    return out


def gates(store: MemoryStore, tasks: Sequence[str], mode: str) -> list[bool]:
    """Per task, whether its gate (`qpp`) reaches the floor in `mode`: computed outside every
    timed turn, and past the store's kept references and profiles, so no turn finds one here."""
    out: list[bool] = []
    with store.db.read() as conn:
        ns_id = conn.namespace_id(NS)
        assert ns_id is not None  # noqa: S101 - the corpus was written
        for task in tasks:
            prof = _relevance.profile(conn, ns_id, task, store.texts)
            scorer = Scorer.build(prof, task, mode=mode, embedder=store.embedder)
            if not prof.terms:
                out.append(False)
                continue
            ref = compute_reference(conn, ns_id, scorer, Indexes(store.vindex, store.texts))
            out.append(ref.qpp >= RECALL_MIN_SCORE)
    return out


# -- turns -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Sample:
    ms: float
    statuses: tuple[str, ...]
    selected: int
    source_ms: tuple[tuple[str, float], ...] = ()
    gate_open: bool = False
    """The task's gate reaches the floor (`gates`): the sources scored their candidates; a
    closed gate stops every source right after the shared reference."""


def uncached(store: MemoryStore) -> list[Source]:
    """The default sources of `store`, keeping no answer across turns: every turn does the full work."""
    return default_sources(store, result_cache=0)


def _sample(started: float, result: SelectionResult) -> Sample:
    return Sample(
        ms=1000 * (time.perf_counter() - started),
        statuses=tuple(str(o.status) for o in result.sources),
        selected=len(result.blocks),
        source_ms=tuple((o.name, o.latency_ms) for o in result.sources),
    )


async def selects(selector: MemorySelector, tasks: Sequence[str]) -> list[Sample]:
    out = []
    for task in tasks:
        started = time.perf_counter()
        result = await selector.select_for_task(task, namespace=NS, budget=BUDGET)
        out.append(_sample(started, result))
    return out


async def assembles(
    selector: MemorySelector, repo: SqliteTaskRepository, task_ids: Sequence[str]
) -> list[Sample]:
    out = []
    async with open_broker(selector=selector, tasks=repo, conversations=repo) as broker:
        for tid in task_ids:
            started = time.perf_counter()
            ctx = await broker.assemble(Turn(task_id=tid, namespace=NS, window=128_000, input_budget=8000))
            ms = 1000 * (time.perf_counter() - started)
            statuses = tuple(str(s.get("status")) for s in ctx.trace.get("sources", []))
            out.append(Sample(ms=ms, statuses=statuses, selected=int(ctx.trace.get("memory_selected", 0))))
    return out


async def concurrent(selector: MemorySelector, tasks: Sequence[str], concurrency: int) -> dict[str, Any]:
    """Run every task with `concurrency` turns in flight; turns/s, latency and deadline misses."""
    pending = list(tasks)
    samples: list[Sample] = []

    queued: list[float] = []

    async def worker() -> None:
        while pending:
            task = pending.pop()
            started = time.perf_counter()
            result = await selector.select_for_task(task, namespace=NS, budget=BUDGET)
            samples.append(_sample(started, result))
            queued.append(result.queued_ms)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    elapsed = time.perf_counter() - started
    lat = pct([s.ms for s in samples])
    return {
        "concurrency": concurrency,
        "turns": len(samples),
        "turns_per_s": round(len(samples) / elapsed, 1),
        "complete_turns_per_s": round(sum(map(_complete, samples)) / elapsed, 1),
        "statuses": _status_counts(samples),
        "latency_ms": lat,
        "share_some_source_missed_deadline": _share(samples, lambda s: "timeout" in s.statuses),
        "share_some_source_cut": _share(samples, lambda s: not _complete(s)),
        "share_every_source_completed": _share(samples, _complete),
        "share_overloaded": _share(samples, lambda s: "overloaded" in s.statuses),
        "queue_ms": pct(queued),
        "p99_within_deadline_plus_10ms": lat["p99"] <= 1000 * DEADLINE + SLACK_MS,
    }


def _status_counts(samples: Sequence[Sample]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in samples:
        for status in s.statuses:
            counts[status] = counts.get(status, 0) + 1
    return counts


def _complete(s: Sample) -> bool:
    return all(SourceStatus(x) in _COMPLETE for x in s.statuses)


def _share(samples: Sequence[Sample], pred: Callable[[Sample], bool]) -> float:
    return round(sum(map(pred, samples)) / max(len(samples), 1), 4)


def _mean_or_none(values: Sequence[int]) -> float | None:
    return round(float(np.mean(values)), 2) if values else None


def _summary(samples: Sequence[Sample]) -> dict[str, Any]:
    return {
        "latency_ms": pct([s.ms for s in samples]),
        "share_every_source_completed": _share(samples, _complete),
        "share_some_source_missed_deadline": _share(samples, lambda s: "timeout" in s.statuses),
        "mean_selected": round(float(np.mean([s.selected for s in samples])), 2) if samples else 0.0,
        "per_source_ms": _per_source(samples),
        "share_gate_open": _share(samples, lambda s: s.gate_open),
        "mean_selected_gate_open": _mean_or_none([s.selected for s in samples if s.gate_open]),
        "latency_ms_gate_open": _pct_or_none([s.ms for s in samples if s.gate_open]),
        "latency_ms_gate_closed": _pct_or_none([s.ms for s in samples if not s.gate_open]),
    }


def _pct_or_none(ms: Sequence[float]) -> dict[str, float] | None:
    """`pct`, or None for no turns (JSON has no NaN)."""
    return pct(ms) if ms else None


def _per_source(samples: Sequence[Sample]) -> dict[str, dict[str, float]]:
    """Each source's own latency (as the selector reports it) over the turns."""
    by: dict[str, list[float]] = {}
    for s in samples:
        for name, ms in s.source_ms:
            by.setdefault(name, []).append(ms)
    return {name: pct(values) for name, values in by.items()}


async def measure_mode(
    store: MemoryStore,
    repo: SqliteTaskRepository,
    tasks: list[tuple[str, bool]],
    mode: str,
    cfg: Config,
    *,
    prefix: str,
) -> dict[str, Any]:
    """Sequential select and assemble, the floors, and throughput at each concurrency, in `mode`."""
    texts = [t for t, _ in tasks]
    async with open_selector(
        uncached(store), deadline=DEADLINE, mode=mode, breaker_threshold=NO_BREAKER
    ) as selector:
        await selects(selector, texts[:10])  # warm: caches, prepared statements
        sel = await selects(selector, texts)
        ids = [f"{prefix}-{i}" for i in range(len(texts))]
        asm = await assembles(selector, repo, ids)
    opened = await anyio.to_thread.run_sync(lambda: gates(store, texts, mode))
    sel = [attrs.evolve(s, gate_open=g) for s, g in zip(sel, opened, strict=True)]
    asm = [attrs.evolve(s, gate_open=g) for s, g in zip(asm, opened, strict=True)]
    floor = await anyio.to_thread.run_sync(lambda: floors(store, texts, dense=mode != "lexical"))
    sel_ms, floor_ms = [s.ms for s in sel], floor
    out: dict[str, Any] = {
        "select_for_task": _summary(sel),
        "assemble": _summary(asm),
        "floor_ms": pct(floor_ms),
        "overhead_ratio": {
            "p50": round(float(np.percentile(sel_ms, 50) / max(np.percentile(floor_ms, 50), 1e-3)), 2),
            "p99": round(float(np.percentile(sel_ms, 99) / max(np.percentile(floor_ms, 99), 1e-3)), 2),
            "median_per_turn": round(
                float(np.median([s / max(f, 1e-3) for s, f in zip(sel_ms, floor_ms, strict=True)])), 2
            ),
        },
        "trivial_abstained": _share(
            [s for s, (_, t) in zip(sel, tasks, strict=True) if t], lambda s: s.selected == 0
        ),
    }
    out["repeated_query"] = await repeated(store, [t for t, trivial in tasks if not trivial], mode, cfg)
    out["throughput"] = await throughput(store, texts, mode, cfg, max_turns=DEFAULT_MAX_TURNS)
    # The same levels without the turn queue, where it could queue at all: what it changes.
    levels = attrs.evolve(cfg, concurrency=tuple(c for c in cfg.concurrency if c > DEFAULT_MAX_TURNS))
    out["throughput_unqueued"] = await throughput(store, texts, mode, levels, max_turns=None)
    return out


async def throughput(
    store: MemoryStore, texts: Sequence[str], mode: str, cfg: Config, *, max_turns: int | None
) -> list[dict[str, Any]]:
    """Turns/s and the share of turns with every source complete at each concurrency level."""
    out = []
    for c in cfg.concurrency:
        turns = (texts * (1 + cfg.throughput_turns // max(len(texts), 1)))[: cfg.throughput_turns]
        # A fresh selector per level, so one level's circuit breakers do not shape the next.
        async with open_selector(
            uncached(store), deadline=DEADLINE, mode=mode, breaker_threshold=NO_BREAKER, max_turns=max_turns
        ) as selector:
            await selects(selector, texts[:5])
            out.append({**await concurrent(selector, turns, c), "max_turns": max_turns})
    return out


async def repeated(store: MemoryStore, texts: Sequence[str], mode: str, cfg: Config) -> dict[str, Any]:
    """The same query asked again on an unchanged namespace, with the default sources (which keep
    their answers across turns): each task once (cold for the cache), then `repeats` times more."""
    firsts: list[Sample] = []
    again: list[Sample] = []
    async with open_selector(
        default_sources(store), deadline=DEADLINE, mode=mode, breaker_threshold=NO_BREAKER
    ) as selector:
        for task in texts[: cfg.repeated_tasks]:
            firsts += await selects(selector, [task])
            again += await selects(selector, [task] * cfg.repeats)
    return {
        "tasks": len(firsts),
        "repeats": cfg.repeats,
        "first_ms": pct([s.ms for s in firsts]),
        "latency_ms": pct([s.ms for s in again]),
        "share_every_source_completed": _share(again, _complete),
    }


def _warm(store: MemoryStore, task: str, modes: Sequence[str]) -> None:
    """Load the vector matrices and open their graphs outside any deadline (a cold load of 100k
    rows takes ~1 s; a search never opens a graph)."""
    store.warm()
    for mode in modes:
        store.recall(task, namespace=NS, mode=mode, min_score=0.0)


async def measure_size(
    *,
    tmp: Path,
    n: int,
    modes: Sequence[str],
    cfg: Config,
    embedder: MiniLMEmbedder,
    pool: _synthetic.Pool,
    log: Callable[[str], None],
) -> dict[str, Any]:
    gen = _synthetic.Generator(seed=cfg.seed + n)
    path = tmp / f"n{n}.db"
    dense = any(m != "lexical" for m in modes)
    pool = pool.at(_synthetic.split(n)["store"])
    vectors = pool.vectors if dense else None
    built = await anyio.to_thread.run_sync(
        lambda: _synthetic.build(path, n, gen, texts=pool.stored, pool=vectors, model_id=embedder.model_id)
    )
    log(f"  built {n} in {built.seconds:.1f} s (+{built.vector_seconds:.1f} s vectors)")
    tasks = gen.tasks(cfg.turns, _synthetic.trivial_tasks(), pool.tasks)
    store = MemoryStore.open(
        path, embedder=embedder if dense else None, mode="hybrid" if dense else "lexical"
    )
    out: dict[str, Any] = {
        "n": n,
        "counts": built.counts,
        "build_seconds": round(built.seconds, 2),
        "build_per_s": round(n / built.seconds, 1),
        "vector_seconds": round(built.vector_seconds, 2),
        "modes": {},
    }
    try:
        repo = SqliteTaskRepository(store.db)
        for mode in modes:
            prefix = f"{mode}"
            for i, (text, _) in enumerate(tasks):
                repo.create_task(text, namespace=NS, task_id=f"{prefix}-{i}")
            await anyio.to_thread.run_sync(functools.partial(_warm, store, tasks[0][0], (mode,)))
            out["modes"][mode] = await measure_mode(store, repo, tasks, mode, cfg, prefix=prefix)
            sel = out["modes"][mode]["select_for_task"]["latency_ms"]
            log(f"  {n} {mode}: select p50 {sel['p50']} p99 {sel['p99']} ms")
        if dense:
            texts = [gen.memory() for _ in range(cfg.single_writes)]
            out["single_write_with_embedding_ms"] = pct(write_ms(store, texts, "e"))
    finally:
        store.close()
    # After the turns: these rows get no vector, which hybrid turns would embed in the turn.
    out["single_write_lexical_ms"] = await anyio.to_thread.run_sync(
        functools.partial(single_lexical_writes, path, gen, cfg.single_writes)
    )
    out["db_bytes"] = db_bytes(path)
    out["peak_rss_mb"] = peak_rss_mb()
    for p in path.parent.glob(path.name + "*"):  # the database, its WAL and its graphs' directory
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return out


def bare_dense(n: int, queries: int, seed: int) -> dict[str, Any]:
    """Exact top-50 cosine (the store's `Exact` search: 8-bit products, a shortlist re-scored) over `n` synthetic unit vectors.

    Speed only: the vectors are random, so nothing is said about recall.
    """
    rng = np.random.default_rng(seed)
    buf = np.empty((n, 384), dtype=np.float32)
    for start in range(0, n, 100_000):
        part = rng.standard_normal((min(100_000, n - start), 384), dtype=np.float32)
        buf[start : start + len(part)] = part / np.linalg.norm(part, axis=1, keepdims=True)
    i8, i8_scale = _quantised.quantise(buf)
    exact = _matrix.Exact(
        buf=buf,
        i8=i8,
        i8_scale=i8_scale,
        rowids=np.arange(n, dtype=np.int64),
        alive=None,
        tags=None,
        allowed=None,
    )
    qs = rng.standard_normal((queries, 384), dtype=np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    exact.search(qs[0], K)
    ms = [1000 * _synthetic.timed(functools.partial(exact.search, q, K)) for q in qs]
    return {"n": n, "k": K, "latency_ms": pct(ms), "note": "synthetic unit vectors; speed only"}


async def run(cfg: Config, log: Callable[[str], None]) -> dict[str, Any]:
    """Every latency figure of one run."""
    embedder = load_default_embedder()
    out: dict[str, Any] = {
        "config": attrs.asdict(cfg),
        "deadline_ms": DEADLINE * 1000,
        "budget": BUDGET,
        "real_memories": _synthetic.real_sets()[0],
    }
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp_s:
        tmp = Path(tmp_s)
        gen = _synthetic.Generator(seed=cfg.seed)
        log(f"ingest: {cfg.pool} memories with embeddings")
        out["ingest"], pool = await anyio.to_thread.run_sync(
            lambda: ingest(tmp, gen, embedder, cfg.pool, cfg.single_writes, lines=cfg.ingest_lines)
        )
        out["sizes"] = {}
        for n in (*cfg.sizes, *cfg.large_sizes):
            log(f"size {n}: lexical + hybrid")
            out["sizes"][str(n)] = await measure_size(
                tmp=tmp, n=n, modes=("lexical", "hybrid"), cfg=cfg, embedder=embedder, pool=pool, log=log
            )
        for n in cfg.lexical_only_sizes:
            log(f"size {n}: lexical")
            out["sizes"][str(n)] = await measure_size(
                tmp=tmp, n=n, modes=("lexical",), cfg=cfg, embedder=embedder, pool=pool, log=log
            )
    if cfg.dense_n:
        log(f"bare dense search over {cfg.dense_n} synthetic vectors")
        out["bare_dense"] = await anyio.to_thread.run_sync(
            lambda: bare_dense(cfg.dense_n, cfg.dense_queries, cfg.seed)
        )
    out["peak_rss_mb"] = peak_rss_mb()
    return out
