"""The embedder's int8 and float32 compute side by side: query time, and agreement on the dev data.

    python -m benchmarks.embedder_compute [--rounds 6]

Times one-query embeds of both paths in alternated rounds (so drift hits both alike), then embeds
every dev conversation's turns and questions with both and reports, over the questions, how many
of each one's ten nearest turns by the int8 vectors are among the float32 vectors' ten, and the
lowest cosine between a text's two vectors. The agreement part skips with a message when the dev
data is absent.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import numpy.typing as npt

from benchmarks import _locomo
from sources.embedding._embedder import MiniLMEmbedder

_QUERIES = [f"what did the user say about topic {i} and their plans for week {i % 7}" for i in range(100)]


def _query_ms(embedder: MiniLMEmbedder) -> tuple[list[float], float]:
    """Each query's ms, and the CPU ms a query, over the queries once."""
    ms, cpu = [], time.process_time()
    for query in _QUERIES:
        started = time.perf_counter()
        embedder.embed([query])
        ms.append(1000 * (time.perf_counter() - started))
    return ms, 1000 * (time.process_time() - cpu) / len(_QUERIES)


def speed(embedders: dict[str, MiniLMEmbedder], rounds: int) -> None:
    """Print p50 / p99 and CPU a query for each path, alternated `rounds` times."""
    ms: dict[str, list[float]] = {name: [] for name in embedders}
    cpu: dict[str, list[float]] = {name: [] for name in embedders}
    for embedder in embedders.values():
        embedder.embed(_QUERIES[:5])  # warm
    for _ in range(rounds):
        for name, embedder in embedders.items():
            times, per_query = _query_ms(embedder)
            ms[name] += times
            cpu[name].append(per_query)
    for name in embedders:
        p50, p99 = np.percentile(ms[name], [50, 99])
        print(
            f"{name}: one query p50 {p50:.2f} ms, p99 {p99:.2f} ms, CPU {np.mean(cpu[name]):.2f} ms a query"
        )


def _top10(queries: npt.NDArray[np.float32], docs: npt.NDArray[np.float32]) -> npt.NDArray[np.intp]:
    return np.argsort(-np.einsum("qd,nd->qn", queries, docs), axis=1)[:, :10]


def agreement(int8: MiniLMEmbedder, floats: MiniLMEmbedder) -> None:
    """Print the dev data's top-10 agreement and lowest cosine of the int8 path against float32."""
    if not _locomo.LOCOMO.exists():
        print(f"dev data not found under {_locomo.SHARED}; agreement skipped")
        return
    overlaps: list[float] = []
    lowest = 1.0
    for conv in _locomo.load():
        turns = [text for _dia, _speaker, text in conv.turns]
        questions = [q.text for q in conv.questions()]
        a_docs, b_docs = int8.embed(turns), floats.embed(turns)
        a_q, b_q = int8.embed(questions), floats.embed(questions)
        lowest = min(
            lowest, float(np.sum(a_docs * b_docs, axis=1).min()), float(np.sum(a_q * b_q, axis=1).min())
        )
        for mine, theirs in zip(_top10(a_q, a_docs), _top10(b_q, b_docs), strict=True):
            overlaps.append(len(set(mine.tolist()) & set(theirs.tolist())) / 10)
    print(
        f"dev data, {len(overlaps)} questions: top-10 agreement int8/float32 {np.mean(overlaps):.4f}, "
        f"lowest cosine of a text's two vectors {lowest:.4f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    embedders = {
        "int8": MiniLMEmbedder.load(compute="int8"),
        "float32": MiniLMEmbedder.load(compute="float32"),
    }
    speed(embedders, args.rounds)
    agreement(embedders["int8"], embedders["float32"])


if __name__ == "__main__":
    main()
