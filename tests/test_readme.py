"""The README's embedding example runs as written and assembles a context with memory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
README_DEADLINE = "deadline=0.1"


def test_readme_embedding_example_runs(tmp_path: Path) -> None:
    """The README's python block runs as written (but for the file path and deadline) and recalls the memory."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, "the README has no python example"
    assert blocks[0].count(README_DEADLINE) == 1, f"the README example no longer says {README_DEADLINE}"
    # A loaded machine can miss the README's 100 ms; this test is of what the example recalls.
    code = blocks[0].replace('"memory.db"', repr(str(tmp_path / "readme.db")))
    code = code.replace(README_DEADLINE, "deadline=30.0")
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(README.parent)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "Deploys freeze every Friday" in done.stdout
    assert "ACTIVE TASK" in done.stdout


def test_readme_command_table_lists_every_subcommand() -> None:
    """Every subcommand of `context-broker` (mcp included) appears in the README's command table."""
    from context_broker._cli._parser import build_parser  # noqa: PLC0415 - the composition root

    text = README.read_text(encoding="utf-8")
    table = text[text.index("| command | what it does |") :].split("\n\n", 1)[0]
    commands = build_parser()._subparsers._group_actions[0].choices
    missing = [name for name in commands if not re.search(rf"`{re.escape(name)}[ `\\]", table)]
    assert not missing, f"README command table lacks {missing}"
