"""benchmarks.concurrency (named apart from tests/sources/storage/postgres/test_concurrency.py): one turn at a time, then several at once, on a store built once."""

from __future__ import annotations

from benchmarks import concurrency


def test_it_measures_one_turn_then_several_at_once_on_a_store_built_once(tmp_path):
    """Both levels run every task, each turn reporting all eight sources; a second run reuses the store.

    Completeness depends on timing: the benchmark reports it, this test does not assert it.
    """
    levels = concurrency.run(n=1_500, mode="lexical", concurrency=3, turns=24, db=tmp_path)
    assert [lv["concurrency"] for lv in levels] == [1, 3]
    assert all(lv["turns"] == 24 for lv in levels)
    assert all(sum(lv["statuses"].values()) == 24 * 8 for lv in levels)  # eight sources a turn
    assert all(0.0 <= lv["share_every_source_completed"] <= 1.0 for lv in levels)
    built = sorted(p.name for p in tmp_path.iterdir())
    again = concurrency.run(n=1_500, mode="lexical", concurrency=2, turns=6, db=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == built
    assert [lv["turns"] for lv in again] == [6, 6]
