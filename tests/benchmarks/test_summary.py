"""The summary's target rows: which size each headline figure is read from."""

from __future__ import annotations

from typing import Any

from benchmarks import _summary


def _size(n: int, modes: dict[str, float]) -> dict[str, Any]:
    return {
        "n": n,
        "modes": {
            mode: {
                "select_for_task": {
                    "latency_ms": {"p50": p99 / 2, "p99": p99},
                    "latency_ms_gate_open": {"p50": p99 / 2 + 1, "p99": p99 + 1},
                    "share_gate_open": 0.8,
                    "mean_selected": 6.5,
                    "share_every_source_completed": 1.0,
                }
            }
            for mode, p99 in modes.items()
        },
    }


def test_headline_rows_read_100k_from_the_sizes_and_1m_from_the_large_sizes() -> None:
    """A 1M size measured in both modes does not become the '100k' headline; its rows are its own."""
    lat = {
        "config": {"sizes": [100], "large_sizes": [1000], "lexical_only_sizes": []},
        "sizes": {
            "100": _size(100, {"lexical": 8.0, "hybrid": 20.0}),
            "1000": _size(1000, {"lexical": 40.0, "hybrid": 70.0}),
        },
    }
    rows = {what: (measured, verdict) for what, measured, _, verdict in _summary.targets(lat)}
    opened = (
        "gate-open turns ({}share 0.8 of the turns, 6.5 memories selected a turn over all turns) at N=100"
    )
    assert rows[f"selection p99, lexical, {opened.format('')}"] == ("9 ms", "met")
    assert rows[f"selection p99, hybrid, {opened.format('task embedding included, ')}"] == ("21 ms", "met")
    assert rows["selection p99, lexical at N=1000"] == ("40 ms", "met")
    assert rows["selection p99, hybrid (task embedding included) at N=1000"] == ("70 ms", "**not met**")
    assert rows["turns with every source complete, hybrid at N=1000"] == ("1", "met")


def test_an_older_run_with_a_lexical_only_million_still_reads_it_as_the_large_size() -> None:
    """A result file from before `large_sizes` (1M lexical only) keeps its 1M row; the hybrid one is not run."""
    lat = {
        "config": {"sizes": [100], "lexical_only_sizes": [1000]},
        "sizes": {
            "100": _size(100, {"lexical": 8.0, "hybrid": 20.0}),
            "1000": _size(1000, {"lexical": 40.0}),
        },
    }
    rows = {what: (measured, verdict) for what, measured, _, verdict in _summary.targets(lat)}
    assert rows["selection p99, lexical at N=1000"] == ("40 ms", "met")
    assert rows["selection p99, hybrid (task embedding included) at N=1000"] == ("-", "not run")
