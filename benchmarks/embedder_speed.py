"""Print the default embedder's single-query latency (p50/p99) and batched throughput."""

from __future__ import annotations

import time

import numpy as np

from sources.embedding._embedder import load_default_embedder


def main() -> None:
    """Time 200 single-query embeds and one embed of 2,000 short texts."""
    started = time.perf_counter()
    embedder = load_default_embedder()
    print(f"load: {time.perf_counter() - started:.2f} s")
    queries = [f"how do I configure feature {i} of the broker" for i in range(200)]
    embedder.embed(queries[:5])  # warm-up
    latencies = []
    for query in queries:
        started = time.perf_counter()
        embedder.embed([query])
        latencies.append((time.perf_counter() - started) * 1000)
    p50, p99 = np.percentile(latencies, [50, 99])
    print(f"single query: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    texts = [f"note {i}: the user prefers short answers about topic {i % 37}" for i in range(2000)]
    started = time.perf_counter()
    embedder.embed(texts)
    elapsed = time.perf_counter() - started
    rate = len(texts) / elapsed
    print(f"batched: {rate:.0f} texts/s ({elapsed:.2f} s for {len(texts)} texts)")


if __name__ == "__main__":
    main()
