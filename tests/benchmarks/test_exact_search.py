"""Tests of the exact-search benchmark's parts (`benchmarks.exact_search`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks import exact_search
from benchmarks._procs import ROOT


def test_speed_times_both_ways_at_each_size(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line per size, naming the float32 and the 8-bit search's p50."""
    monkeypatch.setattr(exact_search, "_SIZES", (300, 700))
    exact_search.speed(rounds=1, k=5)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" rows")[0] for line in lines] == ["300", "700"]
    assert all("float32 p50" in line and "8-bit + re-score p50" in line for line in lines)


def test_a_bad_argument_exits_2_with_a_message() -> None:
    """`--k 0` is refused by the parser, no traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.exact_search", "--k", "0"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "--k must be in 1..6000" in done.stderr
    assert "Traceback" not in done.stderr
