"""The exact search's 8-bit pass against float32: time per search, and agreement on the dev data.

    python -m benchmarks.exact_search [--rounds 6] [--k 50]

Times one search of unit vectors (384 dimensions, random, 6k / 15k / 100k rows) both ways in
alternated rounds, so drift hits both alike: float32 (every row's product, the top k by
partition) and the store's (`sources.storage._matrix.Exact`: every row's 8-bit product, the best
`shortlist(k)` re-scored from float32). Then embeds every dev conversation's turns and questions
and reports, over the questions, how many of each one's ten nearest turns by float32 the 8-bit
ranking alone and the store's search keep. The agreement part skips with a message when the dev
data is absent. The timings are of a warm cache (the same rows every round); inside a turn the
rows are colder, which costs the float32 pass, four times the bytes, more.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from benchmarks import _locomo
from sources.embedding._embedder import MiniLMEmbedder
from sources.storage._matrix import Exact
from sources.storage._quantised import approx_dot, dot, quantise

_SIZES = (6_000, 15_000, 100_000)
_QUERIES = 50


def _unit(rows: int, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    m = rng.standard_normal((rows, 384)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return m


def _exact(buf: npt.NDArray[np.float32]) -> Exact:
    i8, i8_scale = quantise(buf)
    rowids = np.arange(len(buf), dtype=np.int64)
    return Exact(buf=buf, i8=i8, i8_scale=i8_scale, rowids=rowids, alive=None, tags=None, allowed=None)


def _float32_top(buf: npt.NDArray[np.float32], q: npt.NDArray[np.float32], k: int) -> list[int]:
    scores = dot(buf, q)
    top = np.argpartition(-scores, k - 1)[:k]
    ranked: list[int] = top[np.argsort(-scores[top], kind="stable")].tolist()
    return ranked


def _ms(search: Callable[[npt.NDArray[np.float32]], object], queries: npt.NDArray[np.float32]) -> list[float]:
    times = []
    for q in queries:
        started = time.perf_counter()
        search(q)
        times.append(1000 * (time.perf_counter() - started))
    return times


def speed(rounds: int, k: int) -> None:
    """Print p50 of one search both ways at each size, alternated `rounds` times."""
    rng = np.random.default_rng(0)
    for rows in _SIZES:
        buf = _unit(rows, rng)
        exact = _exact(buf)
        queries = _unit(_QUERIES, rng)
        ways = {
            "float32": lambda q, b=buf: _float32_top(b, q, k),
            "8-bit + re-score": lambda q, e=exact: e.search(q, k),
        }
        ms: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, way in ways.items():
                ms[name] += _ms(way, queries)
        line = ", ".join(f"{name} p50 {np.percentile(t, 50):.3f} ms" for name, t in ms.items())
        print(f"{rows:,} rows, k {k}: {line}")


def agreement() -> None:
    """Print the dev data's top-10 agreement of the 8-bit ranking and of the search with float32."""
    if not _locomo.LOCOMO.exists():
        print(f"dev data not found under {_locomo.SHARED}; agreement skipped")
        return
    embedder = MiniLMEmbedder.load()
    ranked: list[float] = []
    searched: list[float] = []
    for conv in _locomo.load():
        docs = embedder.embed([text for _dia, _speaker, text in conv.turns])
        exact = _exact(docs)
        for q in embedder.embed([question.text for question in conv.questions()]):
            want = set(_float32_top(docs, q, 10))
            approx = approx_dot(exact.i8, exact.i8_scale, q)
            ranked.append(len(want & set(np.argsort(-approx)[:10].tolist())) / 10)
            searched.append(len(want & {h.rowid for h in exact.search(q, 10)}) / 10)
    print(
        f"dev data, {len(ranked)} questions: top-10 agreement with float32: 8-bit ranking "
        f"{np.mean(ranked):.4f} (lowest {min(ranked):.1f}), search {np.mean(searched):.4f} "
        f"(lowest {min(searched):.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--k", type=int, default=50)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if not 1 <= args.k <= min(_SIZES):
        parser.error(f"--k must be in 1..{min(_SIZES)}")
    speed(args.rounds, args.k)
    agreement()


if __name__ == "__main__":
    main()
