"""One source as a long-lived actor that serves jobs from a bounded mailbox.

The actor opens its source, runs a few workers, each job under its own cancel scope, and closes
the source when it stops. A source problem never escapes the actor: errors, timeouts, a full
mailbox, an open circuit or a closed actor all end the job with a status. Only real
cancellation propagates.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import anyio
import attrs

from ._breaker import CircuitBreaker
from ._candidates import NOTHING_READ, Reading, reading_of, validate_candidates
from ._exceptions import BrokerClosedError, CandidateError
from ._model import Candidate, SourceStatus
from .log import get_logger

if TYPE_CHECKING:
    from anyio.abc import TaskStatus
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from .abc import Source, SourceRequest

logger = get_logger(__name__)

DEFAULT_MAILBOX_SIZE = 32
DEFAULT_CONCURRENCY = 4

_CLOSED = BrokerClosedError.__name__


@attrs.define(eq=False)
class Job:
    """One request to one source: its deadline, its cancel scope and, once done, its outcome.

    `cancel()` is the caller giving up (nothing is learnt about the source); `expire()` is the
    turn deadline cutting it (a timeout: the turn tells the circuit breaker whether the source
    hung or met contention).
    """

    request: SourceRequest
    deadline: float
    submitted_at: float
    _scope: anyio.CancelScope
    _done: anyio.Event = attrs.field(factory=anyio.Event)
    status: SourceStatus | None = None
    candidates: tuple[Candidate, ...] = ()
    reading: Reading = NOTHING_READ
    """What the answer said beside its candidates (`SourceAnswer`: considered memories, gate)."""
    error: str | None = None
    finished_at: float | None = None
    abandoned: bool = False
    accounted: bool = False

    @classmethod
    def create(cls, request: SourceRequest, *, deadline: float, now: float) -> Job:
        """Create a job waiting to run, cut at `deadline` (absolute, on the event loop's clock)."""
        return cls(
            request=request,
            deadline=deadline,
            submitted_at=now,
            scope=anyio.CancelScope(deadline=deadline),
        )

    @classmethod
    def settled(
        cls, request: SourceRequest, status: SourceStatus, *, now: float, error: str | None = None
    ) -> Job:
        """Create a job decided without asking the source (overloaded, open circuit, closed)."""
        job = cls(request=request, deadline=now, submitted_at=now, scope=anyio.CancelScope())
        job.finish(status, now=now, error=error)
        return job

    @property
    def done(self) -> bool:
        """True once the outcome is known."""
        return self._done.is_set()

    @property
    def scope(self) -> anyio.CancelScope:
        """The scope the source runs in; it carries the deadline."""
        return self._scope

    async def wait(self) -> None:
        """Wait until the job is done."""
        await self._done.wait()

    def cancel(self) -> None:
        """Give up as the caller: cancel the source's work at once."""
        if not self.done:
            self.abandoned = True
        self._scope.cancel()

    def expire(self) -> None:
        """Cut the source's work at the turn deadline (it counts as a timeout)."""
        self._scope.cancel()

    def finish(
        self,
        status: SourceStatus,
        *,
        now: float,
        candidates: tuple[Candidate, ...] = (),
        reading: Reading = NOTHING_READ,
        error: str | None = None,
    ) -> None:
        """Record the outcome once; later calls are ignored."""
        if self.done:
            return
        self.status = status
        self.candidates = candidates
        self.reading = reading
        self.error = error
        self.finished_at = now
        self._done.set()


def _really_cancelled() -> bool:
    """Tell whether the current task is in a cancelled scope (or an asyncio task being cancelled).

    A source can raise a cancellation exception of its own (a bug, or a library leaking one);
    that is a source failure, not a reason to stop the actor.
    """
    if anyio.current_effective_deadline() <= anyio.current_time():
        return True
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not running on asyncio
        return False
    return task is not None and task.cancelling() > 0


def _make_mailbox(size: int) -> tuple[MemoryObjectSendStream[Job], MemoryObjectReceiveStream[Job]]:
    return anyio.create_memory_object_stream[Job](size)


@attrs.define(eq=False)
class SourceActor:
    """Serves one source's jobs from a bounded mailbox with `concurrency` workers.

    Run it with `await task_group.start(actor.run)`: it opens the source before reporting
    started, and closes it (shielded) when the task group is cancelled.
    """

    _source: Source
    _mailbox_size: int = attrs.field(default=DEFAULT_MAILBOX_SIZE, validator=attrs.validators.ge(1))
    _concurrency: int = attrs.field(default=DEFAULT_CONCURRENCY, validator=attrs.validators.ge(1))
    _breaker: CircuitBreaker = attrs.field(factory=CircuitBreaker)
    _send: MemoryObjectSendStream[Job] = attrs.field(init=False)
    _receive: MemoryObjectReceiveStream[Job] = attrs.field(init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _open_error: str | None = attrs.field(default=None, init=False)
    _pending: int = attrs.field(default=0, init=False)
    _running: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self._send, self._receive = _make_mailbox(self._mailbox_size)

    @property
    def name(self) -> str:
        """The source's name."""
        return self._source.name

    @property
    def breaker(self) -> CircuitBreaker:
        """The circuit breaker of this source."""
        return self._breaker

    @property
    def pending(self) -> int:
        """Jobs accepted into the mailbox and not yet finished."""
        return self._pending

    @property
    def running(self) -> int:
        """Fetches in progress right now."""
        return self._running

    @property
    def closed(self) -> bool:
        """True once the actor no longer accepts jobs."""
        return self._closed

    def submit(self, request: SourceRequest, *, deadline: float) -> Job:
        """Queue a request without blocking; the job may be settled at once."""
        now = anyio.current_time()
        if self._open_error is not None:
            return Job.settled(request, SourceStatus.FAILED, now=now, error=self._open_error)
        if self._closed:
            return Job.settled(request, SourceStatus.FAILED, now=now, error=_CLOSED)
        if not self._breaker.allow(now):
            return Job.settled(request, SourceStatus.OPEN_CIRCUIT, now=now)
        job = Job.create(request, deadline=deadline, now=now)
        try:
            self._send.send_nowait(job)
        except anyio.WouldBlock:
            self._breaker.record_inconclusive()
            return Job.settled(request, SourceStatus.OVERLOADED, now=now)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return Job.settled(request, SourceStatus.FAILED, now=now, error=_CLOSED)
        self._pending += 1
        return job

    def stop(self) -> None:
        """Accept no more jobs; workers finish what is queued unless cancelled first."""
        self._closed = True
        self._send.close()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Open the source, serve jobs until cancelled or stopped, then close the source."""
        try:
            await self._open()
            async with anyio.create_task_group() as tg:
                if self._open_error is None:
                    for _ in range(self._concurrency):
                        tg.start_soon(self._work)
                task_status.started()
        finally:
            self.stop()
            self._drain()
            with anyio.CancelScope(shield=True):
                await self._aclose()

    async def _open(self) -> None:
        try:
            await self._source.open()
        except Exception as exc:
            # A source that cannot open is skipped every turn, like one that fails.
            self._open_error = type(exc).__name__
            logger.warning("source.open_failed", source=self.name, error=self._open_error, exc_info=True)

    async def _aclose(self) -> None:
        try:
            await self._source.aclose()
        except Exception:
            logger.warning("source.close_failed", source=self.name, exc_info=True)

    def _drain(self) -> None:
        """Fail every job still queued: the actor is closed."""
        while True:
            try:
                job = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
            job.finish(SourceStatus.FAILED, now=anyio.current_time(), error=_CLOSED)
            self._settle(job)
        self._receive.close()

    async def _work(self) -> None:
        async for job in self._receive:
            try:
                await self._serve(job)
            finally:
                job.finish(SourceStatus.FAILED, now=anyio.current_time(), error=_CLOSED)
                self._settle(job)

    async def _serve(self, job: Job) -> None:
        if job.abandoned:
            job.finish(SourceStatus.TIMEOUT, now=anyio.current_time())
            return
        if anyio.current_time() >= job.deadline:
            # Expired while queued behind busy workers: never start it.
            job.finish(SourceStatus.TIMEOUT, now=anyio.current_time())
            return
        self._running += 1
        try:
            await self._fetch(job)
        finally:
            self._running -= 1

    async def _fetch(self, job: Job) -> None:
        with job.scope:
            try:
                found = await self._source.fetch(job.request)
            except anyio.get_cancelled_exc_class() as exc:
                if _really_cancelled():
                    raise
                self._failed(job, exc)
                return
            except Exception as exc:  # noqa: BLE001 - a source failure is data, not an exception
                self._failed(job, exc)
                return
            try:
                candidates, reading = validate_candidates(found), reading_of(found)
            except CandidateError as exc:
                self._failed(job, exc)
                return
            now = anyio.current_time()
            if now > job.deadline:
                # A source deaf to cancellation answered after the turn moved on: a timeout.
                job.finish(SourceStatus.TIMEOUT, now=now)
                return
            status = SourceStatus.OK if candidates else SourceStatus.EMPTY
            job.finish(status, now=now, candidates=candidates, reading=reading)
            return
        # Only reached when the job's own scope caught the cancellation.
        job.finish(SourceStatus.TIMEOUT, now=anyio.current_time())

    def _failed(self, job: Job, exc: BaseException) -> None:
        logger.debug("source.raised", source=self.name, error=type(exc).__name__, message=str(exc)[:200])
        job.finish(SourceStatus.FAILED, now=anyio.current_time(), error=type(exc).__name__)

    def expire(self, job: Job, *, alone: bool = True) -> None:
        """Cut a job at the turn deadline and tell the breaker now, before the turn returns.

        Late `alone` (every other source of the turn was in time), the source hung: a failure.
        Late together with other sources, the turn met contention: inconclusive.
        """
        job.expire()
        self._account(job, SourceStatus.TIMEOUT if alone else None)

    def abandon(self, job: Job) -> None:
        """Cancel a job its caller gave up on; it says nothing about the source."""
        job.cancel()
        self._account(job, None)

    def _settle(self, job: Job) -> None:
        """Account for a job a worker is done with: the pending count and the breaker.

        A timeout is left to the turn, which alone knows whether the source was late alone.
        """
        self._pending -= 1
        if job.status is not SourceStatus.TIMEOUT:
            self._account(job, job.status)

    def _account(self, job: Job, status: SourceStatus | None) -> None:
        """Tell the circuit breaker how the job went, once per job.

        The turn decides first when it cuts or abandons a job, so by the time a turn returns
        the breaker has seen its outcome; the worker's later view of the same job is ignored.
        """
        if job.accounted:
            return
        job.accounted = True
        if job.abandoned or status is None:
            self._breaker.record_inconclusive()
        elif status in (SourceStatus.OK, SourceStatus.EMPTY):
            self._breaker.record_success()
        elif status in (SourceStatus.FAILED, SourceStatus.TIMEOUT) and job.error != _CLOSED:
            self._breaker.record_failure(anyio.current_time())
        else:
            self._breaker.record_inconclusive()


__all__ = ["DEFAULT_CONCURRENCY", "DEFAULT_MAILBOX_SIZE", "Job", "SourceActor"]
