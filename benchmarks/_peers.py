"""Ours beside what a user would pick instead (chromadb, bm25s, LangGraph's store), in one run.

For each size the same corpus as the latency runs (`_synthetic`, seed + N; the same N texts
for every system, with the same recycled MiniLM vectors) and the same tasks (the latency
run's first `turns`; a few more warm each system up). Every system is its own process
(`_peer_worker`) so its memory figures are its own; each builds its index in turn (nothing
else runs meanwhile), then the tasks go in blocks, the systems taking turns block by block
in a rotating order so drift on the machine hits every system alike. LangGraph scans every
vector in Python on each call, so it answers only the first few tasks of each block.

    python -m benchmarks --skip-latency --skip-quality            # the peers section alone
    python -m benchmarks --no-peers                               # everything else
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import attrs
import numpy as np

from . import _measure, _synthetic
from ._peer_systems import EXTRAS, INCLUDES, REQUIRES, SYSTEMS, Corpus

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from sources.embedding._embedder import MiniLMEmbedder

ROOT: Final = Path(__file__).resolve().parent.parent
SLOW: Final = frozenset({"langgraph"})
RATIOS: Final = (
    # (ours, peers whose p50s add up, what the ratio compares)
    ("ours-select-lexical", ("bm25s",), "select_for_task lexical / bm25s retrieve"),
    ("ours-recall-lexical", ("bm25s",), "recall lexical / bm25s retrieve"),
    ("ours-select-lexical", ("bm25s-scores",), "select_for_task lexical / bm25s scores + top 10"),
    ("ours-recall-lexical", ("bm25s-scores",), "recall lexical / bm25s scores + top 10"),
    (
        "ours-select-hybrid",
        ("chromadb", "minilm"),
        "select_for_task hybrid / (chromadb query + one embedding)",
    ),
    ("ours-recall-hybrid", ("chromadb", "minilm"), "recall hybrid / (chromadb query + one embedding)"),
    (
        "ours-select-hybrid",
        ("chromadb-embedded",),
        "select_for_task hybrid / chromadb query with its embedding in the same call",
    ),
    ("ours-select-hybrid", ("langgraph",), "select_for_task hybrid / LangGraph search"),
    (
        "ours-select-hybrid",
        ("pgvector", "minilm"),
        "select_for_task hybrid / (pgvector query + one embedding)",
    ),
)
BUILD_RATIOS: Final = (
    ("ours-select-hybrid", "chromadb", "build, texts + given vectors: ours / chromadb"),
    ("ours-select-lexical", "bm25s", "build, texts only: ours / bm25s"),
)


@attrs.frozen(kw_only=True)
class Config:
    """Sizes, tasks and blocks of one peers run."""

    sizes: tuple[int, ...] = (10_000, 100_000)
    turns: int = 300
    blocks: int = 10
    warm: int = 5
    slow_tasks: int = 40
    """Tasks LangGraph answers in all (spread over the blocks): it takes seconds per call at 100k."""
    pool: int = 1000
    seed: int = 0
    systems: tuple[str, ...] = SYSTEMS


def missing(system: str, find_spec: Callable[[str], object] = importlib.util.find_spec) -> str | None:
    """Why `system` cannot run here (its module is not installed), or None."""
    module = REQUIRES.get(system)
    if module is None:
        return None
    try:
        found = find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is absent
        found = False
    extra = EXTRAS.get(system, "bench")
    return (
        None if found else f"{system}: skipped, `{module}` is not installed (`pip install -e '.[{extra}]'`)"
    )


def prepare(workdir: Path, n: int, cfg: Config, embedder: MiniLMEmbedder, trivial: Sequence[str]) -> Corpus:
    """Write the corpus every system reads: our generator's N texts and vectors, and the tasks.

    The texts come from a scratch build of our store (every source's memories, a graph node as
    `name: description`), so they are exactly what our systems hold; the vectors are those the
    build stored (the real memories, LoCoMo's turns or our sets' facts, with their MiniLM
    embeddings; the real embeddings of `pool` synthetic memories recycled with noise for the
    others), graph nodes getting recycled ones too. Tasks follow the build on the same
    generator, as in the latency run: the real questions, answerable from the stored memories;
    their vectors are real embeddings.
    """
    recycled = embedder.embed(_synthetic.pool_texts(cfg.seed, cfg.pool))
    real = _synthetic.real_pool(embedder.embed, recycled).at(_synthetic.split(n)["store"])
    pool = real.vectors
    np.save(workdir / "pool.npy", pool)
    (workdir / "pool.json").write_text(json.dumps(list(real.stored)), encoding="utf-8")
    gen = _synthetic.Generator(seed=cfg.seed + n)
    scratch = workdir / "corpus.db"
    _synthetic.build(scratch, n, gen, texts=real.stored, pool=pool, model_id=embedder.model_id)
    texts, vectors = _dump(scratch, pool[len(real.stored) :], cfg.seed + n)  # recycled rows only
    for p in scratch.parent.glob(scratch.name + "*"):
        p.unlink()
    tasks = gen.tasks(cfg.turns + cfg.warm, trivial, real.tasks)
    task_texts = [t for t, _ in tasks]
    task_vectors = np.concatenate(
        [embedder.embed(task_texts[i : i + 64]) for i in range(0, len(task_texts), 64)]
    )
    if len(texts) != n:  # every source's memories, once each
        raise RuntimeError(f"the corpus holds {len(texts)} texts, not {n}")
    return Corpus.write(
        workdir,
        n=n,
        seed=cfg.seed,
        texts=texts,
        vectors=vectors,
        tasks=task_texts,
        trivial=[t for _, t in tasks],
        task_vectors=task_vectors,
    )


def _dump(path: Path, pool: np.ndarray, seed: int) -> tuple[list[str], np.ndarray]:
    import sqlite3  # noqa: PLC0415

    texts: list[str] = []
    blobs: list[bytes | None] = []
    conn = sqlite3.connect(path)
    try:
        for corpus, table in ((0, "entries"), (1, "facts"), (2, "knowledge")):
            for text, blob in conn.execute(
                f"SELECT t.text, v.vec FROM {table} t LEFT JOIN vectors v "
                f"ON v.corpus = {corpus} AND v.src_rowid = t.rowid ORDER BY t.rowid"
            ):
                texts.append(text)
                blobs.append(blob)
        for name, description in conn.execute("SELECT name, description FROM graph_nodes ORDER BY rowid"):
            texts.append(f"{name}: {description}")
            blobs.append(None)
    finally:
        conn.close()
    dim = pool.shape[1]
    vectors = np.empty((len(texts), dim), dtype=np.float32)
    absent = [i for i, b in enumerate(blobs) if b is None]
    for i, b in enumerate(blobs):
        if b is not None:
            vectors[i] = np.frombuffer(b, dtype=np.float32)
    if absent:
        vectors[absent] = _synthetic.recycled_vectors(pool, len(absent), seed + 7)
    return texts, vectors


@attrs.define(eq=False)
class Worker:
    """One system's process and its answers."""

    name: str
    proc: subprocess.Popen[str]
    log_path: Path
    ready: dict[str, Any] = attrs.field(factory=dict)
    blocks: list[dict[str, Any]] = attrs.field(factory=list)
    done: dict[str, Any] = attrs.field(factory=dict)

    @classmethod
    def start(cls, name: str, workdir: Path, cfg: Config) -> Worker:
        log_path = workdir / f"{name}.log"
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
        with log_path.open("w", encoding="utf-8") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks._peer_worker",
                    name,
                    str(workdir),
                    str(cfg.turns),
                    str(cfg.warm),
                ],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
            )
        worker = cls(name=name, proc=proc, log_path=log_path)
        worker.ready = worker._read("ready")
        return worker

    def _read(self, key: str) -> dict[str, Any]:
        assert self.proc.stdout is not None  # noqa: S101 - a pipe by construction
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:].strip()
            last = tail.splitlines()[-1] if tail else "no output"
            raise RuntimeError(f"{self.name} exited ({self.proc.returncode}) before {key!r}: {last}\n{tail}")
        msg: dict[str, Any] = json.loads(line)[key]
        return msg

    def _send(self, msg: dict[str, Any]) -> None:
        stdin: IO[str] | None = self.proc.stdin
        assert stdin is not None  # noqa: S101
        stdin.write(json.dumps(msg) + "\n")
        stdin.flush()

    def block(self, indices: list[int]) -> None:
        if indices:
            self._send({"block": indices})
            self.blocks.append({**self._read("block"), "indices": indices})

    def quit(self) -> None:
        self._send({"quit": True})
        self.done = self._read("done")
        self.proc.wait(timeout=60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def schedule(cfg: Config, systems: Sequence[str]) -> list[list[tuple[str, list[int]]]]:
    """Per block, (system, task indices) in the order they run: the order rotates each block."""
    size = math.ceil(cfg.turns / cfg.blocks)
    slow = math.ceil(cfg.slow_tasks / cfg.blocks)
    out = []
    for b in range(cfg.blocks):
        chunk = list(range(b * size, min(cfg.turns, (b + 1) * size)))
        order = [systems[(b + j) % len(systems)] for j in range(len(systems))]
        out.append([(s, chunk[:slow] if s in SLOW else chunk) for s in order])
    return out


def figures(worker: Worker, corpus: Corpus) -> dict[str, Any]:
    """A system's figures from its blocks and its ready and done reports."""
    ms = [x for b in worker.blocks for x in b["ms"]]
    results = [x for b in worker.blocks for x in b["results"]]
    cpu = sum(b["cpu_s"] for b in worker.blocks)
    wall = sum(b["wall_s"] for b in worker.blocks)
    build = worker.ready["build"]
    tasks = [i for b in worker.blocks for i in b["indices"]]
    trivial = [corpus.trivial[i] for i in tasks]
    return {
        "includes": INCLUDES[worker.name],
        "latency_ms": _measure.pct(ms),
        "cores_per_call": round(cpu / wall, 2) if wall else None,
        "empty_share": round(sum(r == 0 for r in results) / max(len(results), 1), 4),
        "empty_share_trivial": _share([r == 0 for r, t in zip(results, trivial, strict=True) if t]),
        "empty_share_content": _share([r == 0 for r, t in zip(results, trivial, strict=True) if not t]),
        "mean_results": round(float(np.mean(results)), 2) if results else None,
        "build": {
            "items": build.get("items"),
            "seconds": round(build["seconds"], 3) if "seconds" in build else None,
            "per_s": round(build["items"] / build["seconds"], 1) if build.get("seconds") else None,
        },
        "first_call_ms": worker.ready["first_call_ms"],
        "rss_mb": {
            "before_build": worker.ready["rss_before_build_mb"],
            "after_build": worker.ready["rss_after_build_mb"],
            "ready": worker.ready["rss_ready_mb"],
            "end": worker.done.get("rss_end_mb"),
            "peak": worker.done.get("peak_rss_mb"),
        },
        "disk_bytes": worker.done.get("disk_bytes"),
    }


def _share(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def ratios(systems: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Ours over each peer: p50 and p99 latency (p50s of separately timed calls add up), build rate."""
    out: list[dict[str, Any]] = []
    for ours, peers, label in RATIOS:
        if ours not in systems or any(p not in systems for p in peers):
            continue
        row: dict[str, Any] = {"compares": label, "ours": ours, "peers": list(peers)}
        for q in ("p50", "p99"):
            theirs = sum(systems[p]["latency_ms"][q] for p in peers)
            row[q] = round(systems[ours]["latency_ms"][q] / theirs, 2) if theirs else None
        out.append(row)
    for ours, peer, label in BUILD_RATIOS:
        a, b = (systems.get(x, {}).get("build", {}).get("per_s") for x in (ours, peer))
        if a and b:
            out.append({"compares": label, "ours": ours, "peers": [peer], "build": round(a / b, 2)})
    return out


def _step(
    worker: Worker, fn: Callable[[Worker], None], failed: dict[str, str], log: Callable[[str], None]
) -> None:
    """Run one exchange with a worker; a worker that dies is reported and left out, not fatal."""
    try:
        fn(worker)
    except RuntimeError as exc:
        failed[worker.name] = str(exc)
        log(f"  peers: {worker.name} failed: {str(exc).splitlines()[0]}")


def measure_size(
    n: int, cfg: Config, embedder: MiniLMEmbedder, trivial: Sequence[str], log: Callable[[str], None]
) -> dict[str, Any]:
    """Every system at size `n`, side by side."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp_s:
        workdir = Path(tmp_s)
        corpus = prepare(workdir, n, cfg, embedder, trivial)
        log(f"  peers {n}: corpus of {corpus.n} texts, {cfg.turns} tasks")
        workers: dict[str, Worker] = {}
        out: dict[str, Any] = {"n": n, "tasks": cfg.turns, "systems": {}, "failed": {}}
        try:
            for name in cfg.systems:
                if missing(name) is not None:
                    continue
                try:
                    workers[name] = Worker.start(name, workdir, cfg)
                except RuntimeError as exc:
                    out["failed"][name] = str(exc)
                    log(f"  peers {n}: {name} failed: {str(exc).splitlines()[0]}")
                    continue
                log(
                    f"  peers {n}: {name} ready (build {workers[name].ready['build'].get('seconds', 0):.1f} s)"
                )
            for block in schedule(cfg, list(workers)):
                for name, indices in block:
                    if name not in out["failed"]:
                        _step(workers[name], lambda w, idx=indices: w.block(idx), out["failed"], log)
            for name, w in workers.items():
                if name not in out["failed"]:
                    _step(w, Worker.quit, out["failed"], log)
        finally:
            for w in workers.values():
                w.kill()
        for name, w in workers.items():
            if name in out["failed"]:
                continue
            out["systems"][name] = figures(w, corpus)
            lat = out["systems"][name]["latency_ms"]
            log(f"  peers {n}: {name} p50 {lat['p50']} p99 {lat['p99']} ms")
        out["ratios"] = ratios(out["systems"])
        out["trivial_share"] = round(sum(corpus.trivial[: cfg.turns]) / max(cfg.turns, 1), 3)
    return out


def run(cfg: Config, log: Callable[[str], None]) -> dict[str, Any]:
    """The peers section: every size, the systems that are installed, the skips with their reason."""
    from sources import load_default_embedder  # noqa: PLC0415 - loads onnxruntime

    skipped = {s: m for s in cfg.systems if (m := missing(s)) is not None}
    for message in skipped.values():
        log(f"peers: {message}")
    embedder = load_default_embedder()
    trivial = _synthetic.trivial_tasks()
    out: dict[str, Any] = {"config": attrs.asdict(cfg), "skipped": skipped, "sizes": {}}
    for n in cfg.sizes:
        log(f"peers: size {n}")
        out["sizes"][str(n)] = measure_size(n, cfg, embedder, trivial, log)
    return out
