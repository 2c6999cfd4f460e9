"""The public test helpers: the event-loop stall checker catches a source that blocks (real clock)."""

from __future__ import annotations

import time

import anyio
import pytest

from broker import Namespace, SourceStatus, TurnRequest
from broker._selector import open_selector
from broker.abc import SourceRequest
from broker.testing import (
    BlockingSource,
    FakeSource,
    RecordingSelector,
    check_source_never_blocks,
    longest_loop_stall,
    make_candidate,
)

REQUEST = SourceRequest(task="what did we decide", namespace=Namespace(tenant_id="t"))


async def test_a_blocking_call_inside_a_coroutine_reads_as_a_stall():
    """`time.sleep` in a coroutine holds the loop; the ticker sees it even when nothing awaits after."""

    async def blocks() -> None:
        time.sleep(0.1)  # the point of the test

    assert await longest_loop_stall(blocks) >= 0.08


async def test_awaiting_is_not_a_stall():
    """A coroutine that awaits while it waits leaves the loop free: its stall is far below its wait."""
    assert await longest_loop_stall(lambda: anyio.sleep(0.1)) < 0.05


async def test_the_checker_flags_a_blocking_source_and_passes_a_healthy_one():
    """check_source_never_blocks raises for BlockingSource, returns a small stall for FakeSource."""
    with pytest.raises(AssertionError, match="held the event loop"):
        await check_source_never_blocks(BlockingSource("blocker", block=0.1), REQUEST, runs=3)
    assert await check_source_never_blocks(FakeSource("healthy", delay=0.01), REQUEST) < 0.025


async def test_a_blocking_source_makes_healthy_sources_time_out():
    """Why sources must not block: one `time.sleep` in a fetch and a healthy source misses the deadline."""
    healthy = FakeSource("healthy", delay=0.01, candidates=[make_candidate("m1", source="healthy")])
    async with open_selector([BlockingSource("blocker", block=0.3), healthy], deadline=0.1) as selector:
        result = await selector.select_for_task("what did we decide", namespace=Namespace(tenant_id="t"))
    statuses = {s.name: s.status for s in result.sources}
    assert statuses["healthy"] is SourceStatus.TIMEOUT
    assert result.abstained


def test_the_checker_works_on_asyncio_too():
    """The stall checker is backend-neutral (anyio): it catches the blocker under asyncio as well."""
    blocker = BlockingSource("blocker", block=0.1)

    async def main() -> float:
        return await longest_loop_stall(lambda: blocker.fetch(REQUEST))

    assert anyio.run(main, backend="asyncio") >= 0.08


async def test_a_recording_selector_records_each_request_and_its_result():
    """What the broker asked and what it got, turn by turn, with the inner selector's deadline and mode."""
    async with open_selector([FakeSource("a", candidates=[make_candidate("m1")])], deadline=0.5) as inner:
        recorder = RecordingSelector(inner)
        request = TurnRequest(
            task="plan",
            namespace=Namespace(tenant_id="t"),
            deadline=anyio.current_time() + 1,
            mode=recorder.mode,
        )
        result = await recorder.select(request)
    assert (recorder.deadline, recorder.mode) == (0.5, "lexical")
    assert recorder.requests == [request]
    assert recorder.results == [result]
    assert [b.entry_id for b in result.blocks] == ["m1"]
