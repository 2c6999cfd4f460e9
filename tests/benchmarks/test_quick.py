"""Smoke test of the benchmark harness: `python -m benchmarks --quick` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks._peer_systems import SYSTEMS

ROOT = Path(__file__).resolve().parents[2]


def _benchmarks(*args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    """`python -m benchmarks ARGS` from the repository root, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("matplotlib")
    out = tmp_path_factory.mktemp("bench")
    # A guard against a hang, not a speed check: about 3 minutes on a quiet 2-core host, past
    # 300 s there with busy neighbours (every test of this module errored on such a run).
    done = _benchmarks("--quick", "--out", str(out), timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_quick_run_writes_summary_and_plots(results: Path) -> None:
    """The one command writes the summary, the targets table and the latency plots."""
    summary = (results / "SUMMARY.md").read_text(encoding="utf-8")
    assert "## Targets" in summary
    assert "| figure | measured | target | verdict |" in summary
    for name in ("latency_vs_n.png", "throughput.png"):
        assert (results / name).read_bytes().startswith(b"\x89PNG")


def test_machine_is_recorded(results: Path) -> None:
    """machine.json names the CPU, cores, Python, SQLite and library versions."""
    machine = json.loads((results / "machine.json").read_text(encoding="utf-8"))
    assert {"cpu", "cores", "python", "sqlite", "libraries"} <= machine.keys()
    assert machine["cores"] >= 1
    assert "numpy" in machine["libraries"]


def test_latency_results_have_every_figure(results: Path) -> None:
    """latency.json holds per-mode latency, floors, overhead, throughput, writes, size and RSS."""
    latency = json.loads((results / "latency.json").read_text(encoding="utf-8"))
    assert {"ingest", "sizes", "bare_dense", "peak_rss_mb", "deadline_ms"} <= latency.keys()
    assert latency["ingest"]["file_with_embeddings"]["lines_per_s"] > 0
    size = next(iter(latency["sizes"].values()))
    assert {"db_bytes", "peak_rss_mb", "single_write_lexical_ms", "build_per_s"} <= size.keys()
    assert set(size["modes"]) == {"lexical", "hybrid"}
    for mode in size["modes"].values():
        assert {"p50", "p95", "p99"} <= mode["select_for_task"]["latency_ms"].keys()
        assert {"p50", "p95", "p99"} <= mode["assemble"]["latency_ms"].keys()
        assert {"p50", "p99"} <= mode["overhead_ratio"].keys()
        assert [t["concurrency"] for t in mode["throughput"]] == [1, 8, 64]
        for level in [*mode["throughput"], *mode["throughput_unqueued"]]:
            assert {
                "turns_per_s",
                "share_some_source_missed_deadline",
                "share_every_source_completed",
                "queue_ms",
                "max_turns",
            } <= level.keys()
        assert {"p50", "p99"} <= mode["repeated_query"]["latency_ms"].keys()


def test_quality_results_when_dev_data_is_present(results: Path) -> None:
    """With the dev data, quality.json compares the broker with the BM25 baseline; else the summary says why."""
    path = results / "quality.json"
    if not path.exists():
        assert "dev data not found" in (results / "SUMMARY.md").read_text(encoding="utf-8")
        return
    quality = json.loads(path.read_text(encoding="utf-8"))
    assert {"broker-lexical", "bm25-top40"} <= quality["systems"].keys()
    for figures in quality["systems"].values():
        assert {
            "evidence_recall",
            "false_abstention",
            "trivial_abstention",
            "foreign_abstention",
            "irrelevant_memory_rate",
            "tokens_per_turn",
            "category_5",
        } <= figures.keys()


def test_peers_results_have_every_figure(results: Path) -> None:
    """peers.json holds every system's latency, cores, build rate, RSS and disk, or why it was skipped."""
    peers = json.loads((results / "peers.json").read_text(encoding="utf-8"))
    size = next(iter(peers["sizes"].values()))
    assert not size["failed"]
    for name in SYSTEMS:
        if name in peers["skipped"]:
            assert "not installed" in peers["skipped"][name]
            continue
        figures = size["systems"][name]
        assert {"p50", "p95", "p99"} <= figures["latency_ms"].keys()
        assert {"ready", "end", "peak"} <= figures["rss_mb"].keys()
        assert {"cores_per_call", "empty_share", "disk_bytes", "includes", "first_call_ms"} <= figures.keys()
        assert "per_s" in figures["build"]
    assert any("/" in r["compares"] for r in size["ratios"])
    summary = (results / "SUMMARY.md").read_text(encoding="utf-8")
    assert "## Peers at N=" in summary
    assert "bm25s retrieve p50" in summary
    assert (results / "peers.png").read_bytes().startswith(b"\x89PNG")


def test_engines_results_have_both_engines_side_by_side(results: Path) -> None:
    """engines.json holds SQLite and PostgreSQL turns (lexical and hybrid) and writes (1 and 8
    writers) on the same corpus, or why PostgreSQL was skipped."""
    engines = json.loads((results / "engines.json").read_text(encoding="utf-8"))
    summary = (results / "SUMMARY.md").read_text(encoding="utf-8")
    assert "## SQLite and PostgreSQL side by side" in summary
    if "skipped" in engines:
        assert not os.environ.get("CONTEXT_BROKER_REQUIRE_PG"), engines["skipped"]
        assert "not installed" in engines["skipped"]
        assert engines["skipped"] in summary
        return
    size = next(iter(engines["sizes"].values()))
    assert set(size["turns"]) == {"lexical", "hybrid"}
    for per in size["turns"].values():
        assert set(per) == {"sqlite", "postgresql"}
        assert len({s["latency_ms"]["n"] for s in per.values()}) == 1  # the same turns on both
        assert all(0.0 <= s["share_every_source_completed"] <= 1.0 for s in per.values())
    assert set(size["writes"]) == {"1", "8"}
    for per in size["writes"].values():
        assert all(w["entries_per_s"] > 0 and w["errors"] == 0 for w in per.values())
    assert {b["bytes"] > 0 for b in size["build"].values()} == {True}
    assert (results / "engines.png").read_bytes().startswith(b"\x89PNG")


def test_render_writes_the_summary_again_from_the_result_files_alone(results: Path, tmp_path: Path) -> None:
    """`--render` measures nothing: the same summary sections from the JSON files, the peers' descriptions from the code."""
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in results.glob("*.json"):
        (copy / f.name).write_bytes(f.read_bytes())
    peers = json.loads((copy / "peers.json").read_text(encoding="utf-8"))
    for size in peers["sizes"].values():
        for system in size["systems"].values():
            system["includes"] = "a stale description"
    (copy / "peers.json").write_text(json.dumps(peers), encoding="utf-8")
    done = _benchmarks("--render", "--out", str(copy), timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    again = (copy / "SUMMARY.md").read_text(encoding="utf-8")
    first = (results / "SUMMARY.md").read_text(encoding="utf-8")
    assert [line for line in again.splitlines() if line.startswith("## ")] == [
        line for line in first.splitlines() if line.startswith("## ")
    ]
    assert "a stale description" not in again
    assert (copy / "latency_vs_n.png").read_bytes().startswith(b"\x89PNG")


def test_render_without_results_is_a_one_line_error(tmp_path: Path) -> None:
    """`--render` on a directory without results exits 2 with one line, no traceback."""
    done = _benchmarks("--render", "--out", str(tmp_path), timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "no benchmark results" in done.stderr
