"""The `past_tasks` source: a completed task enters only when it clears the floor for the turn's task."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from store_kit import StoreOpener

from broker import RECALL_MIN_SCORE, Namespace
from broker.abc import SourceRequest
from broker.testing import background_memories
from sources import MemoryStore, NewEntry, PastTaskSource, SqliteTaskRepository, StoreReader

if TYPE_CHECKING:
    from collections.abc import Iterator

NS = Namespace(tenant_id="acme", project_id="ops")
RELATED = "Upgrade the Postgres replica of the reporting database"
UNRELATED = "Order new ergonomic chairs for the design team"
TASK = "Plan the Postgres upgrade of the billing database"


@pytest.fixture(params=["lexical", "hybrid"])
def store(make_store: StoreOpener, request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    """Background notes, a note on the billing database and four tasks, in the recall mode
    under test, on the engine under test."""
    with make_store(mode=request.param) as s:
        s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=NS)
        s.add_entry("The billing database runs Postgres 13 on three nodes.", namespace=NS)
        repo = SqliteTaskRepository.from_store(s)
        for task_id, text, status in (
            ("related", RELATED, "completed"),
            ("unrelated", UNRELATED, "completed"),
            ("cancelled", "Postgres upgrade of the billing database, first attempt", "cancelled"),
            ("open", "Postgres upgrade of the billing database, second look", "active"),
        ):
            repo.create_task(text, namespace=NS, task_id=task_id)
            repo.append_turn(task_id, "user", f"{text}, please", namespace=NS)
            if status != "active":
                repo.set_status(task_id, status, namespace=NS)
        yield s


async def fetch(store: MemoryStore, task: str) -> dict[str, float]:
    source = PastTaskSource(StoreReader(store=store))
    got = await source.fetch(SourceRequest(task=task, namespace=NS, mode=store.mode))
    assert all(c.block == "history" and c.source == "past_tasks" for c in got)
    return {c.entry_id: c.score for c in got}


async def test_a_related_completed_task_clears_the_floor(store: MemoryStore) -> None:
    """The completed task about the same system clears the floor; the unrelated one does not."""
    got = await fetch(store, TASK)
    assert got["related"] >= RECALL_MIN_SCORE
    assert got.get("unrelated", 0.0) < RECALL_MIN_SCORE


async def test_only_completed_tasks_are_proposed(store: MemoryStore) -> None:
    """Cancelled and active tasks are never candidates, however close their text."""
    got = await fetch(store, TASK)
    assert not {"cancelled", "open"} & set(got)


@pytest.mark.parametrize("task", ["what time is it", "thanks!", "tell me a joke"])
async def test_a_trivial_task_gets_no_past_task(store: MemoryStore, task: str) -> None:
    """A trivial task brings no past task above the floor."""
    got = await fetch(store, task)
    assert all(score < RECALL_MIN_SCORE for score in got.values())


async def test_another_tenant_sees_none_of_them(store: MemoryStore) -> None:
    """Past tasks never cross namespaces."""
    source = PastTaskSource(StoreReader(store=store))
    other = Namespace(tenant_id="bobco")
    assert await source.fetch(SourceRequest(task=TASK, namespace=other)) == []
