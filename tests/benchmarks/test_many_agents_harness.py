"""The many-agents harness (`python -m benchmarks.many_agents`), small, on both engines: agent
processes each a tenant under one project name, writing and running turns through the broker,
lose no acknowledged write, read no other tenant's row and see no error.

CI runs 3 agents for 3 s on each engine (`--slow`: 10x longer); the issue's run is 8 x 60 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks._agent import mark
from benchmarks.many_agents import PROJECT, verify
from broker import Namespace
from sources import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
AGENTS = 3
SECONDS = 3.0


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m benchmarks.many_agents ARGS` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.many_agents", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _harness(engine: str, url: str, out: Path, seconds: float) -> dict[str, object]:
    done = _run(
        *("--engine", engine, "--url", url, "--agents", str(AGENTS)),
        *("--seconds", str(seconds), "--out", str(out)),
        timeout=180 + 2 * seconds,
    )
    assert out.exists(), done.stderr[-3000:]
    result: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    assert done.returncode == (0 if result["ok"] else 1), done.stderr[-3000:]
    return result


def _assert_invariants(result: dict[str, object]) -> None:
    details = result["agents_detail"]
    assert isinstance(details, list)
    assert [d["error_examples"] for d in details] == [[]] * AGENTS
    assert [d["foreign_examples"] for d in details] == [[]] * AGENTS
    assert result["errors"] == 0
    assert result["foreign_reads"] == 0
    assert result["lost_writes"] == 0
    assert all(d["turns"] > 0 and d["writes_acked"] > 0 for d in details)
    assert result["candidates_checked"] > 0  # the turns did read rows back to check
    assert result["ok"] is True


def test_many_agents_on_sqlite_lose_nothing_and_cross_no_tenant(tmp_path: Path, slow_factor: int) -> None:
    """Agent processes on one SQLite file (WAL) lose no acknowledged write, read no other
    tenant's row through the broker or recall, and see no error (no busy timeout)."""
    result = _harness("sqlite", str(tmp_path / "agents.db"), tmp_path / "r.json", SECONDS * slow_factor)
    _assert_invariants(result)


def test_many_agents_on_postgresql_lose_nothing_and_cross_no_tenant(
    pg_url: str, tmp_path: Path, slow_factor: int
) -> None:
    """Agent processes on one PostgreSQL database lose no acknowledged write, read no other
    tenant's row through the broker or recall, and see no error."""
    result = _harness("postgresql", pg_url, tmp_path / "r.json", SECONDS * slow_factor)
    _assert_invariants(result)


def test_verify_counts_a_lost_write_and_a_row_marked_for_another_tenant(tmp_path: Path) -> None:
    """The harness's check can fail: an acknowledged id that is not stored counts as lost, and a
    stored row carrying another tenant's mark counts as a foreign read."""
    path = tmp_path / "s.db"
    with MemoryStore.open(path, mode="lexical") as store:
        ns = Namespace(tenant_id="a", project_id=PROJECT)
        store.add_entry(mark("alpha beta", "a"), namespace=ns, id="a-1")
        store.add_entry(mark("gamma delta", "b"), namespace=ns, id="a-2")
    checked = verify(str(path), [{"tenant": "a", "acked": ["a-1", "a-2", "a-3"]}])
    assert checked == {"lost": 1, "foreign_stored": 1, "stored": 2}


def test_a_run_without_out_prints_its_table_and_writes_no_result_file(tmp_path: Path) -> None:
    """A quick trial without `--out` leaves the committed results alone: it only prints the table."""
    committed = ROOT / "benchmarks" / "results" / "many_agents_sqlite.json"
    before = committed.read_bytes() if committed.exists() else None
    done = _run(
        *("--engine", "sqlite", "--url", str(tmp_path / "a.db"), "--agents", "1", "--seconds", "1"),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "lost writes" in done.stdout
    assert "wrote" not in done.stdout
    assert (committed.read_bytes() if committed.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".json") == []
