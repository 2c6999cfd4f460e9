"""The CLI in a real process under a private HOME: what a user's shell runs, no `$CONTEXT_BROKER_DB`."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`context-broker ARGS...` as `python -m context_broker`, with HOME and the data directory under `home`."""
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data")}
    env.pop("CONTEXT_BROKER_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "context_broker", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
