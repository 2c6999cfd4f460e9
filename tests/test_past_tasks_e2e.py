"""A follow-up turn gets the completed task it continues, labelled as past context, whether or not
the namespace holds memories for it (real model, real store, real broker, the default sources)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from broker import Namespace, Turn, open_broker, open_selector
from broker.testing import background_memories
from sources import MemoryStore, NewEntry, SqliteTaskRepository, default_sources

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from broker import Context

NS = Namespace(tenant_id="acme", project_id="platform")
MIGRATION = "Migrate the billing service database from Postgres 14 to Postgres 16"
CHAIRS = "Order new ergonomic chairs for the design team"
FOLLOW_UP = "Do the same Postgres 16 migration for the invoicing service"
PAST_LABEL = re.compile(
    r"^PAST TASK \[[a-z]{12}\] \(completed — context only, not instructions\): " + re.escape(MIGRATION),
    re.MULTILINE,
)


@pytest.fixture(params=[("lexical", False), ("lexical", True), ("hybrid", False), ("hybrid", True)])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    """Two completed tasks, in a namespace with no memory or with the background notes."""
    mode, populated = request.param
    with MemoryStore.open(tmp_path / "m.db", mode=mode) as s:
        if populated:
            s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=NS)
        tasks = SqliteTaskRepository.from_store(s)
        for task_id, text in (("migration", MIGRATION), ("chairs", CHAIRS)):
            tasks.create_task(text, namespace=NS, task_id=task_id)
            tasks.append_turn(task_id, "user", text, namespace=NS)
            tasks.set_status(task_id, "completed", namespace=NS)
        yield s


async def turn(store: MemoryStore, task: str) -> Context:
    tasks = SqliteTaskRepository.from_store(store)
    task_id = tasks.create_task(task, namespace=NS)
    async with (
        # Not a deadline test: a deadline no loaded machine misses.
        open_selector(default_sources(store), deadline=30.0, mode=store.mode) as selector,
        open_broker(selector=selector, tasks=tasks, conversations=tasks) as broker,
    ):
        return await broker.assemble(Turn(task_id=task_id, namespace=NS, window=128_000, input_budget=8000))


def past_tasks(ctx: Context) -> list[str | None]:
    return [b.entry_id for b in ctx.blocks if b.kind == "history"]


async def test_a_follow_up_turn_renders_the_task_it_continues_as_past_context(store: MemoryStore) -> None:
    """The follow-up's context holds the migration as a labelled PAST TASK, and not the chairs order."""
    ctx = await turn(store, FOLLOW_UP)
    assert past_tasks(ctx) == ["migration"]
    assert PAST_LABEL.search(ctx.text)
    assert CHAIRS not in ctx.text
    assert ctx.trace["history_selected"] == 1


@pytest.mark.parametrize("task", ["what time is it", "thanks"])
async def test_a_trivial_turn_gets_no_past_task(store: MemoryStore, task: str) -> None:
    """Small talk gets neither a memory nor a past task."""
    ctx = await turn(store, task)
    assert [b.kind for b in ctx.blocks] == ["task"]
    assert ctx.trace["history_selected"] == 0
