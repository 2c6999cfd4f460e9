"""`select` at scale: a first turn from the CLI on a 20k-memory store meets the default deadline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _synthetic
from sources._embedder import load_default_embedder

ROOT = Path(__file__).resolve().parents[3]
N = 20_000
TASKS = 3


@pytest.mark.slow
def test_first_select_on_a_20k_store_completes_at_the_default_deadline(tmp_path: Path) -> None:
    """Nothing loads cold inside the deadline: every source of a fresh process's first turn answers."""
    embedder = load_default_embedder()
    gen = _synthetic.Generator(seed=7)
    pool = embedder.embed([gen.memory() for _ in range(64)])
    db = tmp_path / "s.db"
    _synthetic.build(db, N, gen, pool=pool, model_id=embedder.model_id)
    ns = _synthetic.NS
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for task, _ in gen.tasks(TASKS * 4, ["hi"])[:TASKS]:
        where = ["--db", str(db), "--tenant", ns.tenant_id, "--project", ns.project_id]
        out = subprocess.run(
            [sys.executable, "-m", "context_broker", *where, "select", "--json", task],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            timeout=120,
        )
        statuses = {s["name"]: s["status"] for s in json.loads(out.stdout)["sources"]}
        assert set(statuses.values()) <= {"ok", "empty"}, (task, statuses)
