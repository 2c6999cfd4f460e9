"""Worker processes that start together: each says `ready` once set up, all are released at
once with a line on stdin, and each prints one JSON report line at the end.

Used by `benchmarks.many_agents` (agents) and `benchmarks._engines` (writers): process start-up
(imports, opening the store) stays out of the measured window.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def spawn(module: str, config: dict[str, Any]) -> subprocess.Popen[str]:
    """Start `python -m module CONFIG_JSON` from the repository root, this checkout first on the path."""
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    return subprocess.Popen(
        [sys.executable, "-m", module, json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
    )


def run_together(module: str, configs: list[dict[str, Any]], *, timeout: float) -> list[dict[str, Any]]:
    """Start one process per config, release them together once all are ready, and return
    their reports in order. RuntimeError if one fails to start or exits non-zero."""
    procs = [spawn(module, config) for config in configs]
    try:
        for proc in procs:
            assert proc.stdout is not None  # noqa: S101 - piped by spawn
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"a {module} process did not start (exit {proc.wait()}): {line!r}")
        for proc in procs:
            assert proc.stdin is not None  # noqa: S101 - piped by spawn
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = []
        for proc in procs:
            out, _ = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"a {module} process exited {proc.returncode}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return reports


def wait_for_go() -> None:
    """In a worker: say `ready`, then wait for the release."""
    print("ready", flush=True)
    sys.stdin.readline()
