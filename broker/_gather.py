"""The only concurrent step of a turn: ask every source at once, wait under ONE deadline.

A source that is late, raises, is overloaded or tripped open becomes a status in its outcome;
the turn goes on with the others. Only the caller's own cancellation propagates, and at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from ._model import Candidate, SourceOutcome, SourceStatus
from .log import get_logger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._actor import Job, SourceActor
    from .abc import SourceRequest

logger = get_logger(__name__)

_EVENTS = {
    SourceStatus.OK: "source.completed",
    SourceStatus.EMPTY: "source.completed",
    SourceStatus.FAILED: "source.failed",
    SourceStatus.TIMEOUT: "source.timeout",
    SourceStatus.OVERLOADED: "source.overloaded",
    SourceStatus.OPEN_CIRCUIT: "source.open_circuit",
}


async def gather(
    actors: Sequence[SourceActor], request: SourceRequest, *, deadline: float
) -> tuple[tuple[Candidate, ...], tuple[SourceOutcome, ...]]:
    """Ask every actor at once; wait until all answer or `deadline` passes.

    `deadline` is absolute, on the event loop's clock. Returns the candidates of the sources
    that answered in time and one outcome per actor, in actor order. Never raises for a
    source problem.
    """
    jobs = [actor.submit(request, deadline=deadline) for actor in actors]
    in_time = False
    try:
        with anyio.move_on_at(deadline):
            for job in jobs:
                await job.wait()
        in_time = True
    finally:
        # Late jobs are cut at the deadline; if the caller was cancelled, abandoned at once.
        late = [(a, j) for a, j in zip(actors, jobs, strict=True) if _late(j)]
        for actor, job in late:
            if in_time:
                # Late alone, a source hung; late together, the turn met contention.
                actor.expire(job, alone=len(late) == 1)
            else:
                # Also a job its own scope already cut: its timeout is left to the turn, and
                # a caller that gave up learnt nothing (this frees a half-open probe's slot).
                actor.abandon(job)
    outcomes = tuple(_outcome(actor.name, job, deadline) for actor, job in zip(actors, jobs, strict=True))
    for outcome in outcomes:
        _log(outcome)
    candidates = tuple(
        c for job, o in zip(jobs, outcomes, strict=True) if o.candidates for c in job.candidates
    )
    return candidates, outcomes


def _late(job: Job) -> bool:
    """Not done at the deadline, or done as a timeout (its own scope cut it first)."""
    return not job.done or job.status is SourceStatus.TIMEOUT


def _outcome(name: str, job: Job, deadline: float) -> SourceOutcome:
    # A timeout costs the turn exactly its deadline, however late the event loop noticed.
    if not job.done or job.status in (None, SourceStatus.TIMEOUT) or job.finished_at is None:
        return SourceOutcome(
            name=name,
            status=SourceStatus.TIMEOUT,
            latency_ms=_ms(deadline - job.submitted_at),
        )
    return SourceOutcome(
        name=name,
        status=job.status,
        latency_ms=_ms(job.finished_at - job.submitted_at),
        candidates=len(job.candidates),
        error=job.error,
        considered=job.reading.considered,
        qpp=job.reading.qpp,
    )


def _ms(seconds: float) -> float:
    return max(seconds, 0.0) * 1000.0


def _log(outcome: SourceOutcome) -> None:
    logger.debug(
        _EVENTS[outcome.status],
        source=outcome.name,
        status=str(outcome.status),
        latency_ms=round(outcome.latency_ms, 3),
        candidates=outcome.candidates,
        error=outcome.error,
    )
