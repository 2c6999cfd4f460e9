"""The examples of docs/agents.md run, offline, and print what the page says they do."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
PAGE = ROOT / "docs" / "agents.md"
EXAMPLE_DEADLINE = "deadline=0.25"

# example file -> (the extra it needs, lines its output must contain)
EXPECTED = {
    "asyncio_agent.py": (None, ["1 memories -> Not on Friday", "1 memories -> Scheduled for Monday"]),
    "trio_agent.py": (None, ["memorules: True", "active task last: True"]),
    "langgraph_agent.py": (
        "langgraph",
        [
            "Noted.",
            "From memory: the staging database is rebuilt every Sunday night.",
            "Nothing in memory about that.",
        ],
    ),
    "openai_agents.py": ("agents", ["instructions held: freeze"]),
}


def test_the_page_and_the_examples_match():
    """Every example is linked from the page, and every linked example exists and is tested."""
    linked = set(re.findall(r"\(examples/([\w.]+)\)", PAGE.read_text(encoding="utf-8")))
    on_disk = {p.name for p in EXAMPLES.iterdir() if p.suffix in {".py", ".json"}}
    assert linked == on_disk
    assert {n for n in on_disk if n.endswith(".py")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_offline(name, tmp_path):
    """The example exits 0 and prints the outcome the page describes."""
    extra, expected = EXPECTED[name]
    _skip_without(extra)
    env = {**os.environ, "HOME": str(tmp_path), "OPENAI_API_KEY": "sk-offline-example"}
    # The example as written but for its deadline: a loaded machine can miss 250 ms, and this
    # test is of what the example prints, not of its deadline.
    code = (EXAMPLES / name).read_text(encoding="utf-8")
    assert code.count(EXAMPLE_DEADLINE) == code.count("open_selector("), "the example's deadline moved"
    script = tmp_path / name
    script.write_text(code.replace(EXAMPLE_DEADLINE, "deadline=30.0"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "memory.db")],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for line in expected:
        assert line in done.stdout
    assert done.stderr == ""


def _skip_without(extra):
    if extra is not None:
        pytest.importorskip(
            extra, reason=f"the example needs {extra} (pip install -e '.[langgraph,examples]')"
        )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_explains_its_argument_and_refuses_a_directory(name, tmp_path):
    """`-h` prints the usage and writes no file; a directory as DB_FILE exits 2 with one error line."""
    _skip_without(EXPECTED[name][0])

    def run(*args):
        return subprocess.run(
            [sys.executable, str(EXAMPLES / name), *args],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "HOME": str(tmp_path)},
            cwd=tmp_path,
            check=False,
        )

    helped = run("-h")
    assert (helped.returncode, helped.stdout.startswith("usage:")) == (0, True)
    assert "DB_FILE" in helped.stdout
    assert list(tmp_path.iterdir()) == []
    refused = run(str(tmp_path))
    assert refused.returncode == 2
    assert refused.stderr == f"error: {tmp_path}: is a directory, not a database file\n"


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="the [mcp] extra is not installed")
async def test_mcp_client_config_starts_a_working_server(tmp_path):
    """The stdio entry of examples/mcp.json, as a client would launch it, serves the tools."""
    from mcp import ClientSession, StdioServerParameters  # noqa: PLC0415 - optional extra
    from mcp.client.stdio import stdio_client  # noqa: PLC0415

    config = json.loads((EXAMPLES / "mcp.json").read_text(encoding="utf-8"))["mcpServers"]
    assert config["context-broker-http"]["url"].endswith("/mcp")
    assert config["context-broker-http"]["headers"]["Authorization"].startswith("Bearer ")
    entry = config["context-broker"]
    args = [str(tmp_path / "memory.db") if a == "memory.db" else a for a in entry["args"]]
    command = shutil.which(entry["command"])
    if command is None:  # not installed as a script: the same program through the interpreter
        command, args = sys.executable, ["-m", "context_broker", *args]
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("task_create", {"description": "Try the MCP config"})
    assert result.structured_content["status"] == "active"
