"""gather(): every source asked at once, one deadline, one outcome per source, never a raise."""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING

import anyio
import attrs
import trio
import trio.testing

from broker import Candidate, Namespace, SourceStatus
from broker._actor import SourceActor
from broker._gather import gather
from broker.abc import SourceRequest
from broker.testing import FailingSource, FakeSource, HangingSource, SlowSource, make_candidate

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

REQUEST = SourceRequest(task="what did we decide", namespace=Namespace(tenant_id="t"))


@contextlib.asynccontextmanager
async def running(*sources: FakeSource, **options: int) -> AsyncIterator[list[SourceActor]]:
    actors = [SourceActor(s, **options) for s in sources]
    async with anyio.create_task_group() as tg:
        for actor in actors:
            await tg.start(actor.run)
        yield actors
        tg.cancel_scope.cancel()


async def test_outcomes_in_actor_order_with_latency_and_counts(autojump_clock):
    """One outcome per source, in order; latency is submission to answer, on the loop clock."""
    fast = FakeSource("fast", candidates=[make_candidate("m1", source="fast")])
    slow = SlowSource("slow", delay=0.03, candidates=[make_candidate("m2"), make_candidate("m3")])
    empty = FakeSource("empty")
    async with running(fast, slow, empty) as actors:
        candidates, outcomes = await gather(actors, REQUEST, deadline=trio.current_time() + 0.1)
    assert [o.name for o in outcomes] == ["fast", "slow", "empty"]
    assert [o.status for o in outcomes] == [SourceStatus.OK, SourceStatus.OK, SourceStatus.EMPTY]
    assert [o.candidates for o in outcomes] == [1, 2, 0]
    assert [o.latency_ms for o in outcomes] == [0.0, 30.0, 0.0]
    assert [c.entry_id for c in candidates] == ["m1", "m2", "m3"]


async def test_returns_when_all_answered_not_at_the_deadline(autojump_clock):
    """The deadline is a bound, not a wait: a turn of fast sources ends as soon as they answer."""
    async with running(SlowSource("a", delay=0.02), FakeSource("b")) as actors:
        await gather(actors, REQUEST, deadline=trio.current_time() + 0.1)
        assert trio.current_time() == 0.02


async def test_late_source_is_cut_at_the_deadline_and_its_answer_dropped(autojump_clock):
    """A source still working at the deadline is a timeout; its late candidates never count."""
    late = SlowSource("late", delay=0.2, candidates=[make_candidate("late1")])
    async with running(late, FakeSource("ok", candidates=[make_candidate("ok1")])) as actors:
        candidates, outcomes = await gather(actors, REQUEST, deadline=trio.current_time() + 0.1)
        assert trio.current_time() == 0.1
        await trio.testing.wait_all_tasks_blocked()
        assert late.active == 0
    assert (outcomes[0].status, outcomes[0].latency_ms, outcomes[0].candidates) == (
        SourceStatus.TIMEOUT,
        100.0,
        0,
    )
    assert [c.entry_id for c in candidates] == ["ok1"]


@attrs.define(eq=False)
class ShieldedSource(FakeSource):
    """Ignores cancellation for `delay` seconds, like a blocking call that cannot be stopped."""

    async def fetch(self, request: SourceRequest) -> Sequence[Candidate]:
        """Answer as FakeSource does, deaf to cancellation."""
        with anyio.CancelScope(shield=True):
            return await super().fetch(request)


async def test_source_ignoring_cancellation_cannot_hold_the_turn(autojump_clock):
    """The turn ends at its deadline even if a source will not stop; its late answer is dropped."""
    stubborn = ShieldedSource("stubborn", delay=1.0, candidates=[make_candidate("late")])
    async with running(stubborn) as actors:
        candidates, outcomes = await gather(actors, REQUEST, deadline=trio.current_time() + 0.1)
        assert trio.current_time() == 0.1
        await trio.sleep(1.0)
        assert actors[0].breaker.failures == 1  # its late answer still counts as a timeout
    assert (candidates, outcomes[0].status) == ((), SourceStatus.TIMEOUT)


async def test_all_sources_failing_still_returns(autojump_clock):
    """Even when nothing works the gather returns outcomes, never an exception."""
    async with running(FailingSource("f"), HangingSource("h")) as actors:
        candidates, outcomes = await gather(actors, REQUEST, deadline=trio.current_time() + 0.1)
    assert candidates == ()
    assert [(o.status, o.error) for o in outcomes] == [
        (SourceStatus.FAILED, "RuntimeError"),
        (SourceStatus.TIMEOUT, None),
    ]


async def test_caller_cancellation_abandons_every_job_at_once(autojump_clock):
    """The caller's cancel propagates immediately and cancels the sources' work."""
    hanging, slow = HangingSource("h"), SlowSource("s", delay=5.0)
    async with running(hanging, slow) as actors:
        with trio.move_on_after(0.03) as scope:
            await gather(actors, REQUEST, deadline=trio.current_time() + 0.1)
        assert scope.cancelled_caught
        assert trio.current_time() == 0.03
        await trio.testing.wait_all_tasks_blocked()
        assert hanging.active == slow.active == 0
        assert [a.pending for a in actors] == [0, 0]
        assert [a.breaker.failures for a in actors] == [0, 0]


async def test_overloaded_source_does_not_delay_the_others(autojump_clock):
    """A full mailbox answers at once: the turn ends when the other sources answer."""
    busy = HangingSource("busy")
    async with running(busy, FakeSource("ok"), mailbox_size=1, concurrency=1) as actors:
        turn = functools.partial(gather, actors, REQUEST, deadline=1.0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn)
            await trio.testing.wait_all_tasks_blocked()  # busy's only worker now hangs
            tg.start_soon(turn)  # fills busy's mailbox
            await trio.testing.wait_all_tasks_blocked()
            _, outcomes = await gather(actors, REQUEST, deadline=1.0)
            assert trio.current_time() == 0.0
    assert [o.status for o in outcomes] == [SourceStatus.OVERLOADED, SourceStatus.EMPTY]
