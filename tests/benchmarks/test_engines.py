"""The side-by-side engines benchmark's bookkeeping (`benchmarks._engines`): fair alternation
and the write rate. The section itself runs in the quick benchmark (`test_quick.py`)."""

from __future__ import annotations

from benchmarks._engines import ENGINES, rotated, write_summary


def test_blocks_alternate_which_engine_goes_first() -> None:
    """Over an even number of blocks each engine goes first as often, so drift hits both alike."""
    firsts = [rotated(ENGINES, b)[0] for b in range(4)]
    assert sorted(firsts) == sorted(ENGINES * 2)
    assert all(sorted(rotated(ENGINES, b)) == sorted(ENGINES) for b in range(4))


def test_write_rate_counts_each_block_as_long_as_its_longest_writer() -> None:
    """Entries/s is every writer's writes over the blocks' wall time (a block lasts as long as its
    slowest writer), not a sum of each writer's own rate."""

    def report(writes: int, seconds: float) -> dict[str, object]:
        return {
            "writes": writes,
            "seconds": seconds,
            "write_ms": {"p50": 1.0, "p99": 2.0},
            "errors": [],
            "error_count": 0,
        }

    blocks = [[report(100, 1.0), report(100, 2.0)], [report(300, 2.0), report(0, 1.0)]]
    summary = write_summary(blocks, 2)
    assert summary["writes"] == 500
    assert summary["seconds"] == 4.0
    assert summary["entries_per_s"] == 125.0
    assert summary["errors"] == 0
