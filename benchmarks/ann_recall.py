"""Recall of the HNSW path (usearch) against exact search, on synthetic unit vectors.

Builds the store's own vector index (`sources.storage._vectors`) over n synthetic 384-d unit vectors
twice, once exact and once forced onto HNSW (exact_limit=0), and reports recall@k of HNSW
against exact, build time and per-query latency of both. Two distributions: isotropic
Gaussian (no structure: the hard case for any graph index) and clustered (closer to text
embeddings, which occupy a narrow cone).

    python -m benchmarks.ann_recall [--n 100000] [--queries 200] [--k 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from sources.storage import _ann, _vectors
from sources.storage._sqlite import SqliteEngine
from sources.storage._vectors import Slot

DIM = 384
MODEL = "synthetic"
CORPUS = 1


def synthetic(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "gaussian":
        v = rng.standard_normal((n, DIM)).astype(np.float32)
    else:
        centres = rng.standard_normal((256, DIM)).astype(np.float32)
        v = centres[rng.integers(0, 256, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def measure(
    db: SqliteEngine, queries: np.ndarray, k: int, exact_limit: int
) -> tuple[list[list[int]], float, np.ndarray]:
    index = _vectors.VectorIndex(model_id=MODEL, dim=DIM, exact_limit=exact_limit)
    with db.read() as conn:
        started = time.perf_counter()
        index.warm(conn, Slot(1, CORPUS))  # load (and build) once
        build = time.perf_counter() - started
        found, lat = [], []
        for q in queries:
            started = time.perf_counter()
            hits = index.search(conn, Slot(1, CORPUS), q, k)
            lat.append((time.perf_counter() - started) * 1000)
            found.append([h.rowid for h in hits])
    return found, build, np.percentile(lat, [50, 99])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    for kind in ("gaussian", "clustered"):
        vecs = synthetic(kind, args.n + args.queries, rng)
        data, queries = vecs[: args.n], vecs[args.n :]
        with tempfile.TemporaryDirectory() as tmp:
            db = SqliteEngine.open(Path(tmp) / "ann.db")
            with db.write() as conn:
                conn.store_vectors(Slot(1, CORPUS), list(range(args.n)), data, MODEL)
            exact, load_s, exact_lat = measure(db, queries, args.k, exact_limit=args.n + 1)
            ann, build_s, ann_lat = measure(db, queries, args.k, exact_limit=0)
            db.close()
        recall = np.mean([len(set(a) & set(e)) / args.k for a, e in zip(ann, exact, strict=True)])
        print(
            f"{kind} n={args.n} k={args.k}: HNSW recall@{args.k} {recall:.3f} "
            f"(ef={_ann.expansion_search(args.n)}); exact p50 {exact_lat[0]:.2f} ms p99 {exact_lat[1]:.2f} ms "
            f"(load {load_s:.1f} s); HNSW p50 {ann_lat[0]:.2f} ms p99 {ann_lat[1]:.2f} ms "
            f"(load+build {build_s:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
