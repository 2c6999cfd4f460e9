"""`trace-stats --plot FILE.png`: turn latency and memory scores as histograms, the floor marked.

matplotlib is optional (the `bench` extra); without it the command says how to get it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker import RECALL_MIN_SCORE

from ._app import UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

INSTALL_HINT = "pip install 'context-broker[bench]'"


def scores(events: Sequence[dict[str, Any]]) -> list[float]:
    """Scores of every memory the turns admitted or dropped (the trace keeps no others)."""
    out: list[float] = []
    for event in events:
        for block in [*event.get("blocks", ()), *event.get("dropped", ())]:
            score = block.get("score") if isinstance(block, dict) else None
            if isinstance(score, int | float) and not isinstance(score, bool):
                out.append(float(score))
    return out


def plot(events: Sequence[dict[str, Any]], path: str, *, percentiles: Mapping[str, float]) -> None:
    """Write a PNG: turn latency (p50 and p99 marked) and memory scores (the floor marked)."""
    try:
        import matplotlib as mpl  # noqa: PLC0415 - optional, and slow to import

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as exc:
        raise UsageError(f"error: --plot needs matplotlib, which is not installed: {INSTALL_HINT}") from exc
    latencies = [float(e["timings"]["total_ms"]) for e in events]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.hist(latencies, bins=min(50, max(5, len(latencies) // 4)), color="#4c72b0")
    for name, style in (("p50", "--"), ("p99", ":")):
        value = percentiles[name]
        left.axvline(value, color="black", linestyle=style, label=f"{name} {value:.1f} ms")
    left.set(title=f"turn latency ({len(latencies)} turns)", xlabel="ms", ylabel="turns")
    left.legend()
    memory_scores = scores(events)
    right.hist(memory_scores, bins=20, range=(0.0, 1.0), color="#55a868")
    right.axvline(RECALL_MIN_SCORE, color="#c44e52", label=f"floor {RECALL_MIN_SCORE}")
    right.set(
        title=f"memory scores ({len(memory_scores)} admitted or dropped)", xlabel="score", ylabel="memories"
    )
    right.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise UsageError(f"error: --plot: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)
