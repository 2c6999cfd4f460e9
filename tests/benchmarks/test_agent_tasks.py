"""The task-style harness: its sets are well formed and its figures count what they say."""

from __future__ import annotations

import anyio
import pytest

from benchmarks import agent_tasks


@pytest.mark.parametrize("name", agent_tasks.SETS)
def test_each_set_is_well_formed(name: str) -> None:
    """Every gold id names a fact, every literal index a task, and trivial and foreign tasks exist."""
    data = agent_tasks.load(name)
    facts = data["facts"]
    assert len(facts) >= 40
    assert all(gold and set(gold) <= set(facts) for _task, gold in data["questions"])
    assert all(0 <= i < len(data["questions"]) for i in data["literal"])
    assert data["trivial"]
    assert data["foreign"]


def test_the_held_out_set_shares_no_fact_or_task_with_the_fitted_one() -> None:
    """The test set is another team's: no fact text and no task of the dev set recurs in it."""
    dev, test = agent_tasks.load("dev"), agent_tasks.load("test")
    assert not set(dev["facts"].values()) & set(test["facts"].values())
    assert not {t for t, _ in dev["questions"]} & {t for t, _ in test["questions"]}


def test_figures_count_hits_abstentions_and_the_share_of_gold() -> None:
    """On a tiny set in lexical mode: literal tasks find their facts (one marked literal is counted
    served), small talk and a foreign task get nothing, and the gold share is gold injected over
    all injected (pooled, not a mean of per-task shares)."""
    data = {
        "facts": {
            "f1": "My dentist is Dr. Alvarez on Elm Street.",
            "f2": "The staging database is restored from backup every Sunday night.",
            "f3": "The office coffee machine is descaled on Fridays.",
        },
        "questions": [
            ["Book a checkup with my dentist, Dr. Alvarez", ["f1"]],
            ["When is the staging database restored from backup?", ["f2"]],
        ],
        "trivial": ["what time is it"],
        "foreign": ["Rotate the satellite telemetry decoder's signing keys"],
        "literal": [0],
    }
    figures = anyio.run(agent_tasks.evaluate, data, "lexical", backend="trio")
    assert figures.tasks == 2
    assert figures.hit == 1.0
    assert figures.literal_served == 1
    assert figures.false_abstention == 0.0
    assert figures.trivial_abstention == 1.0
    assert figures.foreign_abstention == 1.0
    assert figures.mean_injected >= 1.0
    assert figures.gold_share == pytest.approx(2 / (2 * figures.mean_injected))
