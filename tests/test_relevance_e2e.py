"""A turn on a small personal store: the gate and the band serve natural questions, follow the
turn's message, and abstain on trivial tasks (real model, real store, real broker)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from broker import Namespace, Turn, open_broker, open_selector
from sources import MemoryStore, NewEntry, SqliteTaskRepository, default_sources

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from broker import Context

ME = Namespace(tenant_id="me")
REAL_CLOCK_DEADLINE = 30.0
"""The turns' deadline: real sources in threads on the real clock, in tests of what they select, not
of the deadline; one no loaded machine misses."""
FACTS = {
    "mia": "Mia is allergic to peanuts.",
    "go": "The checkout service is written in Go.",
    "dentist": "My dentist is Dr. Okafor on Elm Street.",
    "car": "I drive a grey 2019 Honda Civic.",
    "sister": "My sister Lena lives in Rotterdam.",
    "gym": "I go to the gym on Monday and Thursday mornings.",
    "wifi": "The office wifi password changes every quarter.",
    "standup": "Our team standup is at 9:30 every weekday.",
    "cat": "Our cat Pixel needs thyroid pills twice a day.",
    "anniversary": "Our wedding anniversary is on the 14th of June.",
    "vegetarian": "I stopped eating meat three years ago.",
    "bank": "Rent is paid from the joint account on the first of the month.",
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / "me.db", mode="hybrid") as s:
        s.add_entries(
            [NewEntry(id=k, text=v, memory_type="semantic") for k, v in FACTS.items()], namespace=ME
        )
        yield s


async def turn(store: MemoryStore, task: str, message: str | None = None) -> Context:
    tasks = SqliteTaskRepository.from_store(store)
    task_id = tasks.create_task(task, namespace=ME)
    async with (
        open_selector(default_sources(store), deadline=REAL_CLOCK_DEADLINE, mode=store.mode) as selector,
        open_broker(selector=selector, tasks=tasks, conversations=tasks) as broker,
    ):
        return await broker.assemble(
            Turn(task_id=task_id, namespace=ME, window=128_000, input_budget=8000, message=message)
        )


def memories(ctx: Context) -> list[str]:
    return [b.entry_id or "" for b in ctx.blocks if b.kind == "memory"]


async def test_the_message_brings_what_the_task_title_does_not(store: MemoryStore) -> None:
    """'Plan my week' with the message 'and remind me what Mia can't eat' recalls the peanut allergy."""
    without = await turn(store, "Plan my week")
    assert "mia" not in memories(without)
    ctx = await turn(store, "Plan my week", message="and remind me what Mia can't eat")
    assert "mia" in memories(ctx)
    assert ctx.trace["query_has_message"] is True


@pytest.mark.parametrize(
    ("task", "fact"),
    [
        ("What snacks should I pack for Mia's school trip?", "mia"),
        ("What programming language is the checkout service in?", "go"),
        ("Book me a teeth cleaning appointment", "dentist"),
    ],
)
async def test_a_natural_question_gets_its_fact(store: MemoryStore, task: str, fact: str) -> None:
    """A question phrased without the fact's words still gets the fact, first among the memories."""
    ctx = await turn(store, task)
    assert memories(ctx)[:3].count(fact) == 1
    assert ctx.trace["qpp"] is not None
    assert ctx.trace["qpp"] >= ctx.trace["floor"]


@pytest.mark.parametrize(
    "task", ["what time is it", "thanks!", "tell me a joke", "what is the capital of Peru"]
)
async def test_a_trivial_task_gets_nothing(store: MemoryStore, task: str) -> None:
    """Trivial tasks abstain on a small store too: zero memories."""
    ctx = await turn(store, task)
    assert memories(ctx) == []
    assert ctx.trace["memory_abstained"] is True


async def test_what_time_is_it_abstains_in_a_tiny_store_holding_the_word_time(tmp_path: Path) -> None:
    """A six-fact store whose only match for "what time is it" is a weak one on "time" injects nothing."""
    facts = [
        "I work part-time at the library on weekends",
        "Mia is allergic to peanuts",
        "The checkout service is written in Go",
        "My favourite time of year is autumn",
        "Standup is at 9:30 every morning",
        "We moved to Lisbon in 2021",
    ]
    with MemoryStore.open(tmp_path / "tiny.db", mode="hybrid") as tiny:
        tiny.add_entries([NewEntry(text=t) for t in facts], namespace=ME)
        async with open_selector(
            default_sources(tiny), deadline=REAL_CLOCK_DEADLINE, mode="hybrid"
        ) as selector:
            for task in ("what time is it", "what time is it?"):
                assert (await selector.select_for_task(task, namespace=ME, budget=40)).abstained
            served = await selector.select_for_task("what time is standup?", namespace=ME, budget=40)
    assert "Standup is at 9:30 every morning" in [b.text for b in served.blocks]
