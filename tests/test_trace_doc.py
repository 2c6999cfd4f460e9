"""docs/trace-schema.md's recipe for a host: its structlog configuration writes JSON lines that
`trace-stats` reads, and `Context.trace` with the event's name is the same line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "trace-schema.md"

TURN = textwrap.dedent(
    """
    import anyio
    from broker import TURN_COMPLETED, Namespace, Turn, open_broker, open_selector
    from sources import MemoryStore, SqliteTaskRepository, default_sources

    NS = Namespace(tenant_id="t")

    async def main():
        store = MemoryStore.open("m.db", mode="lexical")
        store.add_entry("The staging database is rebuilt every Sunday night.", namespace=NS)
        tasks = SqliteTaskRepository.from_store(store)
        task_id = tasks.create_task("When is the staging database rebuilt?", namespace=NS)
        async with (
            open_selector(default_sources(store), mode="lexical", deadline=30.0) as selector,
            open_broker(selector=selector, tasks=tasks, conversations=tasks) as broker,
        ):
            ctx = await broker.assemble(Turn(task_id=task_id, namespace=NS, window=32000, input_budget=4000))
        store.close()
        print(json.dumps({"event": TURN_COMPLETED, **ctx.trace}))

    anyio.run(main)
    """
)


def test_the_docs_structlog_recipe_feeds_trace_stats(tmp_path: Path) -> None:
    """The doc's configuration, then one turn: the file holds its `turn.completed` line, which
    `trace-stats` counts, and `{"event": ..., **ctx.trace}` carries the same fields."""
    (recipe,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    script = tmp_path / "host.py"
    script.write_text("import json\n" + recipe + TURN, encoding="utf-8")
    done = _python(tmp_path, str(script))
    assert done.returncode == 0, done.stderr
    logged = [
        json.loads(line) for line in (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    (event,) = [e for e in logged if e["event"] == "turn.completed"]
    printed = json.loads(done.stdout)
    assert {k: v for k, v in event.items() if k not in {"level", "timestamp"}} == printed
    stats = _python(tmp_path, "-m", "context_broker", "trace-stats", "--json", "trace.jsonl")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["turns"] == 1


def _python(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the current interpreter with `args` in `cwd`, `cwd` as HOME (nothing lands in the user's)."""
    env = {**os.environ, "HOME": str(cwd)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env, check=False
    )
