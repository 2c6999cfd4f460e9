"""Shared fixtures: dev data paths in ../shared (tests skip cleanly without it), the
validation of every `turn.completed` event the suite emits against the shipped schema, and a
small real filesystem to fill up (a tmpfs in a private mount namespace), and a real
PostgreSQL server (the `pg_server` plugin)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import structlog

from broker._trace import TURN_COMPLETED, trace_schema

pytest_plugins = ["pg_server"]  # the real PostgreSQL server of the PostgreSQL tests

SLOW_FACTOR = 10
"""How many times longer the `--slow` (nightly) versions of the reliability tests run."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--slow`: run the long versions of the fault matrix, crash loop, load and deadline tests."""
    parser.addoption(
        "--slow",
        action="store_true",
        default=False,
        help=f"run the reliability tests {SLOW_FACTOR}x longer (nightly); CI runs the short versions",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` run only with --slow."""
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="a long (nightly) version: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def slow_factor(request: pytest.FixtureRequest) -> int:
    """1 in CI, SLOW_FACTOR with --slow: multiply counts and durations by it."""
    return SLOW_FACTOR if request.config.getoption("--slow") else 1


SHARED = Path(os.environ.get("CONTEXT_BROKER_SHARED", Path(__file__).resolve().parents[2] / "shared"))
LOCOMO = SHARED / "data" / "locomo" / "locomo-dev.json"
TRIVIAL = SHARED / "data" / "trivial_tasks.txt"


@pytest.fixture
def trivial_tasks() -> list[str]:
    """The tasks that must recall nothing (skips when ../shared is absent)."""
    if not TRIVIAL.exists():
        pytest.skip(f"dev data not found at {TRIVIAL}")
    return [t.strip() for t in TRIVIAL.read_text(encoding="utf-8").splitlines() if t.strip()]


@pytest.fixture
def locomo_path() -> Path:
    """The LoCoMo dev file (skips when ../shared is absent)."""
    if not LOCOMO.exists():
        pytest.skip(f"dev data not found at {LOCOMO}")
    return LOCOMO


@pytest.fixture(autouse=True)
def trace_events() -> Iterator[list[dict[str, Any]]]:
    """Capture structlog events; after the test, validate each `turn.completed` one."""
    with structlog.testing.capture_logs() as events:
        yield events
    validator = jsonschema.Draft202012Validator(trace_schema())
    for event in events:
        if event.get("event") == TURN_COMPLETED:
            validator.validate(event)


ROOT = Path(__file__).resolve().parents[1]

# Runs first inside the private mount namespace: mount a small tmpfs on argv[1] and give the
# script helpers to fill it. Nothing mounted here is visible outside, and it all goes away
# with the process, however it ends.
_TMPFS_PRELUDE = """
import errno, json, os, subprocess, sys
from pathlib import Path
HERE = Path(sys.argv[1])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + sys.argv[2], "tmpfs", str(HERE)], check=True)

def fill(leave=0):
    fd = os.open(HERE / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    size = (HERE / "filler").stat().st_size
    os.truncate(HERE / "filler", max(size - leave, 0))

def free():
    (HERE / "filler").unlink()

def report(value):
    sys.stdout.write("REPORT " + json.dumps(value) + "\\n")
"""


def _unshare_prefix() -> list[str] | None:
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return None
    # As root a private mount namespace is enough; otherwise map ourselves to root in a user
    # namespace, where mounting a tmpfs is allowed (if the kernel allows user namespaces).
    flags = (
        ["--mount", "--propagation", "private"]
        if os.geteuid() == 0
        else ["--user", "--map-root-user", "--mount"]
    )
    return ["unshare", *flags]


@pytest.fixture
def on_small_disk(tmp_path: Path) -> Callable[..., Any]:
    """Run a Python script on a tmpfs of `size` mounted at HERE; return what it `report()`ed.

    Skips where mount namespaces are unavailable. The script gets `HERE`, `fill(leave=0)`
    (fill the disk, then free `leave` bytes), `free()` and `report(value)`.
    """
    prefix = _unshare_prefix()
    if prefix is None:
        pytest.skip("needs Linux with unshare(1)")
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()

    def run(script: str, *, size: str = "1m") -> Any:
        probe = subprocess.run([*prefix, "true"], capture_output=True, check=False)
        if probe.returncode != 0:
            pytest.skip(f"mount namespaces unavailable: {probe.stderr.decode().strip()}")
        result = subprocess.run(
            [*prefix, sys.executable, "-c", _TMPFS_PRELUDE + script, str(mount_point), size],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        reports = [
            line.removeprefix("REPORT ") for line in result.stdout.splitlines() if line.startswith("REPORT ")
        ]
        assert len(reports) == 1, result.stdout[-3000:]
        return json.loads(reports[0])

    return run
