"""The ranking harness: hit@k and the k a share needs count what they say, on a tiny store."""

from __future__ import annotations

from benchmarks import ranking


def test_hit_at_and_smallest_k_count_ranks() -> None:
    """hit@k counts ranks below k (a missing fact never hits); the smallest k is the first reaching the share."""
    ranks: list[int | None] = [0, 0, 2, 4, None]
    assert ranking.hit_at(ranks, 1) == 0.4
    assert ranking.hit_at(ranks, 3) == 0.6
    assert ranking.hit_at(ranks, ranking.DEPTH) == 0.8
    assert ranking.smallest_k(ranks, 0.6) == 3
    assert ranking.smallest_k(ranks, 0.8) == 5
    assert ranking.smallest_k(ranks, 0.9) is None


def test_the_oracle_serves_the_best_ranked_tasks_and_stops_at_each_fact() -> None:
    """For 0.6 of five tasks the oracle takes the three best-ranked facts (ranks 0, 0, 2: 1 + 1 +
    3 memories) over all five tasks; a share beyond the facts found has none."""
    ranks: list[int | None] = [0, 0, 2, 4, None]
    assert ranking.oracle_injected(ranks, 0.6) == 1.0
    assert ranking.oracle_injected(ranks, 0.8) == 2.0
    assert ranking.oracle_injected(ranks, 1.0) is None


def test_gold_ranks_reads_the_first_right_fact() -> None:
    """In lexical mode a literal task's fact ranks first; a task no fact shares a word with has none."""
    data = {
        "facts": {
            "f1": "My dentist is Dr. Alvarez on Elm Street.",
            "f2": "The staging database is restored from backup every Sunday night.",
            "f3": "The office coffee machine is descaled on Fridays.",
        },
        "questions": [
            ["Book a cleaning with my dentist Alvarez.", ["f1"]],
            ["When is the staging database restored from backup?", "f2"],
            ["Plan a hiking trip to the volcano.", ["f3"]],
        ],
    }
    assert ranking.gold_ranks(data, "lexical") == [0, 0, None]
