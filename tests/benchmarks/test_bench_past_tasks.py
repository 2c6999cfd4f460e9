"""The past-task harness: its set is well formed and its figures count what they say."""

from __future__ import annotations

import anyio

from benchmarks import past_tasks


def test_the_set_is_well_formed_and_its_splits_do_not_overlap() -> None:
    """Every follow-up names a completed task of its namespace; fit and held-out teams are disjoint
    and together are every team."""
    data = past_tasks.load()
    assert not set(data["fit"]) & set(data["held_out"])
    assert set(data["fit"]) | set(data["held_out"]) == set(data["teams"])
    for team in data["teams"].values():
        assert len(team["past"]) >= 10
        assert all(gold in team["past"] for _task, gold in team["follow"])
        assert team["new"]
    assert data["trivial"]


def test_figures_count_served_follow_ups_and_wrong_injections() -> None:
    """On a tiny namespace in lexical mode: the literal follow-up gets its task, the new task and
    small talk get none, and the counts add up per split."""
    data = {
        "teams": {
            "t": {
                "past": {
                    "a": "Migrate the billing service database from Postgres 14 to Postgres 16",
                    "b": "Order new ergonomic chairs for the design team",
                },
                "follow": [["Do the same Postgres 16 migration for the invoicing service", "a"]],
                "new": ["Book a table for the team lunch"],
            }
        },
        "fit": ["t"],
        "held_out": [],
        "trivial": ["what time is it"],
    }
    got = anyio.run(past_tasks.evaluate, data, "fit", "lexical", backend="trio")
    assert (got.follow_ups, got.served, got.wrong_on_follow_ups) == (1, 1, 0)
    assert (got.new, got.new_given_any, got.trivial, got.trivial_given_any) == (1, 0, 1, 0)
    empty = anyio.run(past_tasks.evaluate, data, "held_out", "lexical", backend="trio")
    assert empty.follow_ups == empty.new == 0
