from __future__ import annotations

import subprocess
import sys


def test_python_m_broker_points_to_the_command_and_exits_2():
    """`python -m broker` (the library cannot import the app's CLI) names `context-broker` in one line, exit 2."""
    done = subprocess.run(
        [sys.executable, "-m", "broker", "stats"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: the command line is `context-broker` (or `python -m context_broker`)\n"
