"""The CLI in a real process: what a user's shell runs (`python -m context_broker ARGS...`)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

UNRACED = ("--deadline-ms", "30000")
"""A selection deadline a loaded machine does not race: for a test of what a turn selects, not of
its deadline (the default, 100 ms, can lose a source while other processes hold the cores)."""


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`context-broker ARGS...` under a private HOME, the data directory under `home`, no `$CONTEXT_BROKER_DB`."""
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data")}
    env.pop("CONTEXT_BROKER_DB", None)
    return _run(args, env)


def run_on(db: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`context-broker ARGS...` with `$CONTEXT_BROKER_DB` naming `db` (and `stdin` as its input)."""
    return _run(args, {**os.environ, "CONTEXT_BROKER_DB": str(db)}, stdin=stdin)


def _run(
    args: tuple[str, ...], env: dict[str, str], *, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "context_broker", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=120,
        check=False,
    )
