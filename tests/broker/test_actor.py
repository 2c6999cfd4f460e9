"""SourceActor: one source behind a bounded mailbox; every problem ends the job with a status."""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import anyio
import attrs
import trio
import trio.testing

from broker import Namespace, SourceStatus
from broker._actor import SourceActor
from broker._breaker import CircuitBreaker
from broker.abc import SourceRequest
from broker.testing import (
    FailingSource,
    FakeSource,
    HangingSource,
    SelfCancellingSource,
    SlowSource,
    make_candidate,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

REQUEST = SourceRequest(task="what did we decide", namespace=Namespace(tenant_id="t"))
FAR = math.inf


@attrs.define(eq=False)
class UnopenableSource(FakeSource):
    """Its open() raises, like a missing model file."""

    async def open(self) -> None:
        """Record the open, then fail."""
        await super().open()
        raise OSError("no such model")


@contextlib.asynccontextmanager
async def running(*actors: SourceActor) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        for actor in actors:
            await tg.start(actor.run)
        yield
        tg.cancel_scope.cancel()


async def test_answer_is_ok_with_candidates():
    """A healthy source's candidates come back with status ok."""
    source = FakeSource("a", candidates=[make_candidate("m1", source="a")])
    actor = SourceActor(source)
    async with running(actor):
        job = actor.submit(REQUEST, deadline=FAR)
        await job.wait()
    assert job.status is SourceStatus.OK
    assert [c.entry_id for c in job.candidates] == ["m1"]
    assert source.requests == [REQUEST]


async def test_full_mailbox_is_overloaded_without_blocking():
    """Backpressure is a status, decided at once: the caller never waits for room."""
    source = FakeSource("a")
    actor = SourceActor(source, mailbox_size=1)
    first = actor.submit(REQUEST, deadline=FAR)
    second = actor.submit(REQUEST, deadline=FAR)
    assert not first.done
    assert second.done
    assert second.status is SourceStatus.OVERLOADED
    assert actor.pending == 1
    actor.stop()
    async with running(actor):
        await first.wait()
    assert source.calls == 1


async def test_closed_actor_fails_with_broker_closed_error():
    """A stopped actor answers every job at once with failed / BrokerClosedError."""
    actor = SourceActor(FakeSource("a"))
    actor.stop()
    job = actor.submit(REQUEST, deadline=FAR)
    assert job.done
    assert job.status is SourceStatus.FAILED
    assert job.error == "BrokerClosedError"
    async with running(actor):
        pass


async def test_hanging_fetch_is_cut_at_the_job_deadline(autojump_clock):
    """The job's own scope carries the deadline: the source is cancelled exactly then."""
    source = HangingSource("h")
    actor = SourceActor(source)
    async with running(actor):
        job = actor.submit(REQUEST, deadline=trio.current_time() + 0.5)
        await job.wait()
        assert job.status is SourceStatus.TIMEOUT
        assert job.finished_at == 0.5
        await trio.testing.wait_all_tasks_blocked()
        assert source.active == 0
        assert actor.pending == 0


async def test_exception_becomes_failed_and_the_actor_keeps_serving():
    """A raise is data: status failed with the class name, and the next job still runs."""
    source = FailingSource("f", error=KeyError("boom"), candidates=[make_candidate("m1")])
    actor = SourceActor(source)
    async with running(actor):
        failed = actor.submit(REQUEST, deadline=FAR)
        await failed.wait()
        source.failing = False
        ok = actor.submit(REQUEST, deadline=FAR)
        await ok.wait()
    assert (failed.status, failed.error) == (SourceStatus.FAILED, "KeyError")
    assert ok.status is SourceStatus.OK


async def test_leaked_cancellation_is_a_failure_not_a_shutdown():
    """A source raising a cancellation it was never sent fails its job, not the actor."""
    source = SelfCancellingSource("c", leak=True)
    actor = SourceActor(source)
    async with running(actor):
        leaked = actor.submit(REQUEST, deadline=FAR)
        await leaked.wait()
        source.leak = False
        after = actor.submit(REQUEST, deadline=FAR)
        await after.wait()
    assert (leaked.status, leaked.error) == (SourceStatus.FAILED, "Cancelled")
    assert after.status is SourceStatus.EMPTY


async def test_self_cancelled_scope_is_just_empty():
    """A source that cancels a scope of its own and returns nothing is empty, not timed out."""
    actor = SourceActor(SelfCancellingSource("c"))
    async with running(actor):
        job = actor.submit(REQUEST, deadline=FAR)
        await job.wait()
    assert job.status is SourceStatus.EMPTY


async def test_contract_breaking_answer_is_failed():
    """Returning something that is not a sequence of Candidates fails the job."""
    actor = SourceActor(FakeSource("bad", candidates=["not a candidate"]))
    async with running(actor):
        job = actor.submit(REQUEST, deadline=FAR)
        await job.wait()
    assert (job.status, job.error) == (SourceStatus.FAILED, "CandidateError")


async def test_cancel_stops_the_fetch_at_once(autojump_clock):
    """The caller giving up cancels the source's work without any time passing."""
    source = HangingSource("h")
    actor = SourceActor(source, breaker=CircuitBreaker(threshold=1))
    async with running(actor):
        job = actor.submit(REQUEST, deadline=FAR)
        await trio.testing.wait_all_tasks_blocked()
        assert source.active == 1
        job.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert source.active == 0
        assert actor.pending == 0
        assert trio.current_time() == 0.0
        assert actor.breaker.failures == 0


async def test_job_cancelled_while_queued_is_never_fetched():
    """A job abandoned before a worker takes it never reaches the source."""
    source = FakeSource("a")
    actor = SourceActor(source)
    job = actor.submit(REQUEST, deadline=FAR)
    job.cancel()
    async with running(actor):
        await job.wait()
    assert source.calls == 0
    assert actor.pending == 0


async def test_job_expired_while_queued_is_never_fetched(autojump_clock):
    """Behind a busy worker, a job whose deadline passed is timed out without asking the source."""
    source = HangingSource("h")
    actor = SourceActor(source, concurrency=1)
    async with running(actor):
        busy = actor.submit(REQUEST, deadline=1.0)
        queued = actor.submit(REQUEST, deadline=0.5)
        await busy.wait()
        await queued.wait()
    assert busy.status is queued.status is SourceStatus.TIMEOUT
    assert source.calls == 1


async def test_workers_serve_jobs_concurrently(autojump_clock):
    """With four workers, four slow jobs take one delay, not four."""
    actor = SourceActor(SlowSource("s", delay=1.0), concurrency=4)
    async with running(actor):
        jobs = [actor.submit(REQUEST, deadline=FAR) for _ in range(4)]
        for job in jobs:
            await job.wait()
    assert [job.finished_at for job in jobs] == [1.0] * 4


async def test_breaker_trips_after_consecutive_errors(autojump_clock):
    """Errors count against the source; once open the source is not asked."""
    source = FailingSource("f")
    actor = SourceActor(source, breaker=CircuitBreaker(threshold=2, cooldown=30.0))
    async with running(actor):
        jobs = [actor.submit(REQUEST, deadline=FAR) for _ in range(2)]
        for job in jobs:
            await job.wait()
        third = actor.submit(REQUEST, deadline=FAR)
    assert [j.status for j in jobs] == [SourceStatus.FAILED] * 2
    assert third.status is SourceStatus.OPEN_CIRCUIT
    assert source.calls == 2


async def test_a_timeout_is_the_turns_to_judge(autojump_clock):
    """The worker does not count a timeout: only the turn knows if the source was late alone."""
    source = SlowSource("s", delay=5.0)
    actor = SourceActor(source, breaker=CircuitBreaker(threshold=1, cooldown=30.0))
    async with running(actor):
        cut_by_itself = actor.submit(REQUEST, deadline=trio.current_time() + 1.0)
        await cut_by_itself.wait()
        assert cut_by_itself.status is SourceStatus.TIMEOUT
        assert actor.breaker.failures == 0
        contended = actor.submit(REQUEST, deadline=trio.current_time() + 1.0)
        actor.expire(contended, alone=False)
        assert actor.breaker.failures == 0
        hung = actor.submit(REQUEST, deadline=trio.current_time() + 1.0)
        actor.expire(hung, alone=True)
        assert actor.breaker.failures == 1
        assert actor.submit(REQUEST, deadline=FAR).status is SourceStatus.OPEN_CIRCUIT


async def test_open_failure_fails_every_job_and_still_closes(autojump_clock):
    """A source that cannot open is skipped with its error class, and released anyway."""
    source = UnopenableSource("u")
    actor = SourceActor(source)
    async with running(actor):
        job = actor.submit(REQUEST, deadline=FAR)
    assert (job.status, job.error) == (SourceStatus.FAILED, "OSError")
    assert source.closed == 1
    assert source.calls == 0


async def test_stopping_mid_fetch_fails_the_job_and_closes_the_source(autojump_clock):
    """Shutdown cancels work in flight, answers its caller and closes the source."""
    source = HangingSource("h")
    actor = SourceActor(source)
    async with running(actor):
        job = actor.submit(REQUEST, deadline=FAR)
        await trio.testing.wait_all_tasks_blocked()
    assert (job.status, job.error) == (SourceStatus.FAILED, "BrokerClosedError")
    assert (source.opened, source.closed, source.active) == (1, 1, 0)
    assert actor.pending == 0
    assert actor.breaker.failures == 0
