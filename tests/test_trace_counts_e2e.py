"""The trace counts what a turn's sources considered, below the floor included: an abstaining
turn reports the memories its retrieval weighed and an irrelevant-memory rate of 1, a turn that
selects a rate under 1 (real store, real broker, the default sources)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from broker import Namespace, Turn, open_broker, open_selector
from broker.testing import background_memories
from sources import MemoryStore, NewEntry, SqliteTaskRepository, default_sources

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from broker import Context

NS = Namespace(tenant_id="acme", project_id="team")


@pytest.fixture(params=["lexical", "hybrid"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    """The background notes of a fictional team, in the recall mode under test."""
    with MemoryStore.open(tmp_path / "m.db", mode=request.param) as s:
        s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=NS)
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


@pytest.mark.parametrize("task", ["what time is it", "What did Caroline paint last summer?"])
async def test_an_abstaining_turn_counts_the_memories_it_weighed(store: MemoryStore, task: str) -> None:
    """No memory clears the floor, yet the trace counts what the retrieval considered: rate 1.0."""
    trace = (await turn(store, task)).trace
    assert trace["memory_abstained"] is True
    assert trace["memory_selected"] == 0
    assert trace["memory_candidates"] > 0
    assert trace["irrelevant_memory_rate"] == 1.0


async def test_an_abstaining_turn_reports_its_closed_gate(store: MemoryStore) -> None:
    """The gate that kept every memory out is in the trace, under the floor, not null."""
    trace = (await turn(store, "What did Caroline paint last summer?")).trace
    assert trace["memory_abstained"] is True
    assert trace["qpp"] is not None
    assert 0.0 <= trace["qpp"] < trace["floor"]


async def test_what_time_is_it_still_gets_no_memory(store: MemoryStore) -> None:
    """Counting below-floor memories injects none of them: the context is the active task alone."""
    ctx = await turn(store, "what time is it")
    assert [b.kind for b in ctx.blocks] == ["task"]


async def test_a_turn_that_selects_has_a_rate_under_one(store: MemoryStore) -> None:
    """A turn that selects counts its selected memories among the considered: 0 < rate < 1."""
    trace = (await turn(store, "Who approved the Lighthouse 2.4 release checklist?")).trace
    assert trace["memory_selected"] > 0
    assert trace["memory_candidates"] > trace["memory_selected"]
    assert 0.0 < trace["irrelevant_memory_rate"] < 1.0
