"""Small measuring helpers shared by the latency run and the peers' worker processes.

Kept free of the package's own imports, so a peer's process measures the peer, not us.
"""

from __future__ import annotations

import resource
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def pct(values: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / p99 / mean / max of milliseconds, rounded."""
    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan"), "mean": float("nan"), "n": 0}
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "p50": round(float(p50), 3),
        "p95": round(float(p95), 3),
        "p99": round(float(p99), 3),
        "mean": round(float(np.mean(values)), 3),
        "max": round(float(np.max(values)), 3),
        "n": len(values),
    }


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far.

    VmHWM where /proc has it: `ru_maxrss` survives exec, so a child started from a big parent
    would report the parent's peak. Elsewhere `ru_maxrss` (KiB on Linux).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:  # noqa: PTH123 - a tiny read
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError):
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def rss_mb() -> float | None:
    """Resident set size of this process now (None where /proc is absent)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:  # noqa: PTH123 - a tiny read, no Path needed
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return round(pages * resource.getpagesize() / 2**20, 1)


def db_bytes(path: Path) -> int:
    """Bytes of a SQLite file with its -wal and -shm companions."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def dir_bytes(path: Path) -> int:
    """Bytes of every file under `path`."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
