"""A host that configured nothing: the library prints nothing and writes only where it is told."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

TURN = textwrap.dedent(
    """
    import json, sys
    import anyio
    from broker import Namespace, Turn, open_broker, open_selector
    from sources import MemoryStore, SqliteTaskRepository, default_sources

    async def main(db: str, result: str) -> None:
        ns = Namespace(tenant_id="acme", project_id="web")
        store = await anyio.to_thread.run_sync(lambda: MemoryStore.open(db, mode="hybrid"))
        store.add_entry("Deploys freeze every Friday after the payment incident.", namespace=ns)
        tasks = SqliteTaskRepository.from_store(store)
        task_id = tasks.create_task("Can we deploy the payment fix on Friday?", namespace=ns)
        async with (
            open_selector(default_sources(store), deadline=30.0, mode=store.mode) as selector,
            open_broker(selector=selector, tasks=tasks, conversations=tasks) as broker,
        ):
            ctx = await broker.assemble(Turn(task_id=task_id, namespace=ns, window=128_000, input_budget=8_000))
        store.close()
        with open(result, "w", encoding="utf-8") as f:
            json.dump({"mode": ctx.trace["recall_mode"], "selected": ctx.trace["memory_selected"]}, f)

    anyio.run(main, sys.argv[1], sys.argv[2])
    """
)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_hybrid_turn_prints_nothing_and_writes_only_the_database(tmp_path):
    """Importing the library and running a turn (real model) leaves stdout, stderr and HOME empty."""
    home, cwd, data = tmp_path / "home", tmp_path / "cwd", tmp_path / "data"
    for d in (home, cwd, data):
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "ORT_"))}
    env |= {"HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", TURN, str(data / "m.db"), str(data / "result.json")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert json.loads((data / "result.json").read_text()) == {"mode": "hybrid", "selected": 1}
    assert _files(home) == []  # no ~/.cache/Microsoft telemetry queue, no user dirs
    assert _files(cwd) == []
    assert set(_files(data)) <= {"m.db", "m.db-wal", "m.db-shm", "result.json"}
