"""Run every benchmark and write results/*.json, SUMMARY.md and PNG plots.

    python -m benchmarks [--quick] [--out DIR] [--sizes 10000,100000] [--large-sizes 1000000] [--lexical-sizes N]
                         [--turns 300] [--throughput-turns 400] [--dense-n 1000000] [--skip-quality] [--skip-latency] [--no-peers] [--peer-sizes 10000,100000]
                         [--no-engines]
    python -m benchmarks --render [--out DIR]


Full run: about 20 minutes on 2 cores, plus the peers section (chromadb, bm25s and LangGraph's
`InMemoryStore` beside ours on the same corpus and tasks, each in its own process; about 10
minutes more at 10k and 100k, most of it Chroma's build and LangGraph's scans). `--quick`
(tiny sizes, few turns, lexical + hybrid, a tiny peers pass, quality on a subsample) finishes
in under a minute: a smoke test of the harness, not figures. The peers section alone:
`python -m benchmarks --skip-latency --skip-quality`; without it: `--no-peers`. A peer whose
package is missing is skipped with a message (`pip install -e '.[bench]'` installs them).
SQLite and PostgreSQL side by side (`benchmarks._engines`: the latency sizes, a throwaway
PostgreSQL server; skipped with a message without `pip install -e '.[postgres-test]'`), alone:
`python -m benchmarks --skip-latency --skip-quality --no-peers`; without it: `--no-engines`.
`--render` measures nothing: it writes SUMMARY.md and the plots again from the result files in
`--out` (after a change to how they are presented), with the peers' descriptions of what each
timed call includes taken from the code (`benchmarks._peer_systems.INCLUDES`).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import attrs
import structlog

from . import (
    _engines,
    _latency,
    _locomo,
    _machine,
    _peer_systems,
    _peers,
    _quality,
    _summary,
    agent_tasks,
    personal,
)

ROOT = Path(__file__).resolve().parent.parent
QUICK = _latency.Config(
    sizes=(2_000,),
    large_sizes=(),
    lexical_only_sizes=(),
    turns=30,
    throughput_turns=40,
    pool=50,
    ingest_lines=200,
    single_writes=5,
    dense_n=20_000,
    dense_queries=20,
    repeated_tasks=5,
    repeats=5,
)
QUICK_PEERS = _peers.Config(sizes=(2_000,), turns=30, blocks=3, warm=2, slow_tasks=6, pool=50)
QUICK_ENGINES = _engines.Config(
    sizes=(2_000,), turns=30, blocks=2, write_seconds=1.0, write_blocks=1, pool=50
)


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test of the harness")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--sizes", type=_sizes, help="lexical + hybrid sizes (default 10000,100000)")
    parser.add_argument(
        "--large-sizes",
        type=_sizes,
        help="lexical + hybrid sizes without peers and engines (default 1000000)",
    )
    parser.add_argument("--lexical-sizes", type=_sizes, help="lexical-only sizes (default none)")
    parser.add_argument("--turns", type=int, help="sequential turns per size and mode (default 300)")
    parser.add_argument("--throughput-turns", type=int, help="turns per concurrency level (default 400)")
    parser.add_argument("--dense-n", type=int, help="bare dense search size (default 1000000; 0 skips)")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument(
        "--peers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="chromadb, bm25s and LangGraph's store beside ours (default: on)",
    )
    parser.add_argument("--peer-sizes", type=_sizes, help="peers sizes (default: the lexical + hybrid sizes)")
    parser.add_argument(
        "--engines",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="SQLite and PostgreSQL side by side at the lexical + hybrid sizes (default: on)",
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="measure nothing: write the summary and plots from --out's files",
    )
    return parser.parse_args(argv)


def config(args: argparse.Namespace) -> _latency.Config:
    cfg = QUICK if args.quick else _latency.Config()
    changes: dict[str, Any] = {}
    if args.sizes is not None:
        changes["sizes"] = args.sizes
    if args.large_sizes is not None:
        changes["large_sizes"] = args.large_sizes
    if args.lexical_sizes is not None:
        changes["lexical_only_sizes"] = args.lexical_sizes
    if args.turns is not None:
        changes["turns"] = args.turns
    if args.dense_n is not None:
        changes["dense_n"] = args.dense_n
    if args.throughput_turns is not None:
        changes["throughput_turns"] = args.throughput_turns
    return attrs.evolve(cfg, **changes)


def peers_config(args: argparse.Namespace, cfg: _latency.Config) -> _peers.Config:
    """The peers run on the latency run's corpus and tasks: its sizes, turns, pool and seed."""
    if args.quick:
        return QUICK_PEERS if args.peer_sizes is None else attrs.evolve(QUICK_PEERS, sizes=args.peer_sizes)
    return _peers.Config(
        sizes=args.peer_sizes if args.peer_sizes is not None else cfg.sizes,
        turns=cfg.turns,
        pool=cfg.pool,
        seed=cfg.seed,
    )


def engines_config(args: argparse.Namespace, cfg: _latency.Config) -> _engines.Config:
    """The engines run at the latency run's sizes, turns, pool and seed."""
    if args.quick:
        return QUICK_ENGINES if args.sizes is None else attrs.evolve(QUICK_ENGINES, sizes=args.sizes)
    return _engines.Config(sizes=cfg.sizes, turns=cfg.turns, pool=cfg.pool, seed=cfg.seed)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write(out: Path, name: str, data: dict[str, Any]) -> None:
    (out / name).write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def render(args: argparse.Namespace) -> int:
    """Write SUMMARY.md and the plots again from the result files a full run left in `--out`."""
    out: Path = args.out
    found = {n: out / f"{n}.json" for n in ("machine", "latency", "peers", "engines", "quality")}
    if not found["machine"].exists():
        print(f"python -m benchmarks: error: no benchmark results in {out}", file=sys.stderr)
        return 2
    data = {n: json.loads(f.read_text(encoding="utf-8")) if f.exists() else None for n, f in found.items()}
    cfg, notes = config(args), []
    if data["latency"] is not None:
        notes += _latency_notes(cfg, data["latency"])
    if data["peers"] is not None:
        for size in data["peers"]["sizes"].values():
            for name, system in size["systems"].items():
                system["includes"] = _peer_systems.INCLUDES.get(name, system["includes"])
        write(out, "peers.json", data["peers"])
        notes += _peers_notes(peers_config(args, cfg), data["peers"])
    _plot(out, data["latency"], data["quality"], data["peers"], notes, engines=data["engines"])
    machine: dict[str, Any] = json.loads(found["machine"].read_text(encoding="utf-8"))
    summary = _summary.render(
        machine, data["latency"], data["quality"], notes, peers=data["peers"], engines=data["engines"]
    )
    (out / "SUMMARY.md").write_text(summary, encoding="utf-8")
    log(f"wrote {out / 'SUMMARY.md'} from the result files")
    return 0


def run(args: argparse.Namespace) -> int:
    """Measure, then write every result file, the plots and the summary."""
    if args.render:
        return render(args)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    machine = _machine.machine(ROOT)
    write(out, "machine.json", machine)
    latency = quality = peers = None
    if args.quick:
        notes.append("`--quick` run: tiny sizes and few turns; it checks the harness, not the figures.")
    cfg = config(args)
    if not args.skip_latency:
        latency = anyio.run(_latency.run, cfg, log)
        write(out, "latency.json", latency)
        notes += _latency_notes(cfg, latency)
    if args.peers:
        pcfg = peers_config(args, cfg)
        peers = _peers.run(pcfg, log)
        write(out, "peers.json", peers)
        notes += _peers_notes(pcfg, peers)
    else:
        notes.append("Peers (chromadb, bm25s, LangGraph): skipped (--no-peers).")
    engines = _run_engines(args, cfg, out, notes)
    if args.skip_quality:
        notes.append("Relevance quality: skipped (--skip-quality).")
    elif not _locomo.LOCOMO.exists() or not _locomo.TRIVIAL.exists():
        notes.append(f"Relevance quality: skipped, dev data not found under {_locomo.SHARED}.")
    else:
        quality = anyio.run(functools.partial(_run_quality, quick=args.quick))
        quality["personal"] = _run_personal(quick=args.quick)
        quality["agent"] = _run_agent(quick=args.quick)
        write(out, "quality.json", quality)
        if args.quick:
            notes.append("Quality: 2 conversations, 10 questions each, lexical broker and BM25 only.")
    machine["loadavg_at_end"] = _machine.load_average()
    write(out, "machine.json", machine)
    _plot(out, latency, quality, peers, notes, engines=engines)
    (out / "SUMMARY.md").write_text(
        _summary.render(machine, latency, quality, notes, peers=peers, engines=engines), encoding="utf-8"
    )
    log(f"wrote {out}")
    return 0


def _run_engines(
    args: argparse.Namespace, cfg: _latency.Config, out: Path, notes: list[str]
) -> dict[str, Any] | None:
    """SQLite and PostgreSQL side by side (`--no-engines`: skipped, with a note)."""
    if not args.engines:
        notes.append("SQLite and PostgreSQL side by side: skipped (--no-engines).")
        return None
    engines = _engines.run(engines_config(args, cfg), log)
    write(out, "engines.json", engines)
    if "skipped" in engines:
        notes.append(engines["skipped"] + ".")
    return engines


async def _run_quality(*, quick: bool) -> dict[str, Any]:
    from sources.embedding._embedder import load_default_embedder  # noqa: PLC0415 - loads onnxruntime

    return await _quality.run(
        modes=("lexical",) if quick else ("lexical", "dense", "hybrid"),
        embedder=None if quick else load_default_embedder(),
        max_questions=10 if quick else None,
        conversations=2 if quick else None,
        baselines=("bm25",) if quick else ("bm25", "dense", *_installed("chromadb", "langgraph")),
        log=log,
    )


def _run_personal(*, quick: bool) -> dict[str, dict[str, dict[str, float]]]:
    """The personal-assistant sets (`benchmarks.personal`): dev (fitted on) and test (held out)."""
    sets, modes = (("test",), ("lexical",)) if quick else (personal.SETS, personal.MODES)
    result = personal.run(sets, modes)
    log("quality: personal sets done")
    return result


def _run_agent(*, quick: bool) -> dict[str, dict[str, dict[str, float]]]:
    """The task-style sets (`benchmarks.agent_tasks`): dev (fitted on) and test (held out)."""
    sets, modes = (("test",), ("hybrid",)) if quick else (agent_tasks.SETS, agent_tasks.MODES)
    result = agent_tasks.run(sets, modes)
    log("quality: task-style sets done")
    return result


def _installed(*peers: str) -> tuple[str, ...]:
    return tuple(p for p in peers if _peers.missing(p) is None)


def _latency_notes(cfg: _latency.Config, latency: dict[str, Any]) -> list[str]:
    rate = latency["ingest"]["batched_with_embeddings"]["per_s"]
    notes = [
        (
            f"Corpora: the first store entries are real memories, from {latency.get('real_memories', 'an unrecorded source')}, stored with "
            "their own MiniLM embeddings; the other rows are synthetic (words the real ones never use), their "
            f"vectors the real embeddings of {cfg.pool} synthetic memories recycled with noise: embedding runs at "
            f"{rate} memories/s here, so embedding 100k memories would take longer than the whole run. Exact cosine search costs the "
            "same whatever the values; an HNSW graph (above 20,000 vectors a namespace) may search these "
            "clustered vectors faster than real ones. Every task is embedded for real, inside the measured turn."
        ),
        (
            "Tasks are the real questions (each answerable from a stored memory, so the gate can open and memories "
            "be selected; the share of turns where it does is in the latency table) plus 20% trivial tasks (which "
            "must select nothing); the "
            "latency table gives the gate-open turns' share, memories selected and latency beside the gate-closed "
            "turns'."
        ),
    ]
    notes.append(
        "Circuit breakers are off in every measured selector (threshold 10^9): every turn asks every "
        "source, so a slow source shows as `timeout`, never as a fast `open-circuit` skip. Deadline "
        f"{latency['deadline_ms']:g} ms (the default) on every turn."
    )
    if not cfg.large_sizes:
        notes.append("1M: not run in this configuration.")
    return notes


def _peers_notes(cfg: _peers.Config, peers: dict[str, Any]) -> list[str]:
    notes = [
        (
            "Peers: the latency run's corpus (its generator and seed; the peers hold every source's texts "
            f"in one flat index, with the same vectors) and its first {cfg.turns} tasks. Each system runs "
            "in its own process and builds its own index while nothing else runs; then the tasks go in "
            f"{cfg.blocks} blocks, the systems taking turns in a rotating order. LangGraph answers the first "
            f"{-(-cfg.slow_tasks // cfg.blocks)} tasks of each block only (each call scans every vector in "
            "Python). Cores per call = CPU time / wall time of the process over its calls (ONNX and BLAS "
            "threads and Chroma's own threads included)."
        )
    ]
    notes += [f"Peers: {message}." for message in peers["skipped"].values()]
    for key, size in peers["sizes"].items():
        notes += [
            f"Peers at N={key}: {name} failed: {msg.splitlines()[0]} (peers.json has its log's tail)"
            for name, msg in size["failed"].items()
        ]
    return notes


def _plot(
    out: Path,
    latency: dict[str, Any] | None,
    quality: dict[str, Any] | None,
    peers: dict[str, Any] | None,
    notes: list[str],
    *,
    engines: dict[str, Any] | None = None,
) -> None:
    try:
        from . import _plots  # noqa: PLC0415

        if latency is not None:
            _plots.latency_vs_n(latency, out)
            _plots.throughput(latency, out)
        if quality is not None:
            _plots.quality(quality, out)
            _plots.recall_vs_injected(quality, out)
        if peers is not None and any(s["systems"] for s in peers["sizes"].values()):
            _plots.peers(peers, out)
        if engines is not None and engines["sizes"]:
            _plots.engines(engines, out)
    except ImportError:
        notes.append("Plots: skipped, matplotlib is not installed (`pip install -e '.[bench]'`).")


def main(argv: list[str] | None = None) -> int:
    # The benchmark is a host: it configures logging (warnings and errors only, to stderr).
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    return run(parse(argv))


if __name__ == "__main__":
    raise SystemExit(main())
