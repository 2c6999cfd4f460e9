"""At most a few turns at once: more concurrent turns than the machine can serve wait briefly
in line instead of all sharing the CPU and all losing sources to the deadline.

Turns are mostly Python under one GIL: past a few in flight, each extra turn slows every other
one, until none finishes its sources in time. So a selector serves at most `max_turns` turns at
once, first come first served, and the rest queue.

The queue counts against the turn's deadline: the deadline is absolute from the call, and a
turn that waited starts its sources with what is left. A turn never overruns its deadline as
its caller sees it, and never raises for waiting too long. It gives up its place at the latest
moment it could still be served — the deadline less what a turn has recently taken (an
exponential average of the served turns' durations) — and then answers at once with every
source `overloaded`, asked nothing, its circuit breaker told nothing. A free slot is always
taken, however little time is left: without a queue that turn would have run anyway.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Final

import anyio
import attrs

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

_SMOOTHING: Final = 0.2  # weight of the latest served turn in the average


def default_max_turns() -> int:
    """Turns served at once by default: one per usable CPU, at least 2.

    Measured on 2 cores at 50k memories, 8 and 64 concurrent lexical turns: a limit of 1-2
    completed every source in 33-35 turns/s, 4 in 15-31/s, no limit in 8-21/s.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(2, cpus)


@attrs.frozen(kw_only=True)
class Slot:
    """A turn's place: whether it was served, and how long it waited (seconds)."""

    admitted: bool
    queued: float


@attrs.define(eq=False)
class TurnQueue:
    """Serves at most `max_turns` turns at once (None: no limit); the rest wait in line."""

    _max_turns: int | None
    _limiter: anyio.CapacityLimiter | None = attrs.field(init=False, default=None)
    _service: float = attrs.field(init=False, default=0.0)

    def __attrs_post_init__(self) -> None:
        if self._max_turns is not None:
            self._limiter = anyio.CapacityLimiter(self._max_turns)

    @property
    def service(self) -> float:
        """Seconds a served turn has recently taken (exponential average; 0 before any)."""
        return self._service

    @contextlib.asynccontextmanager
    async def slot(self, deadline: float) -> AsyncIterator[Slot]:
        """Wait for a place until the turn could no longer be served by `deadline` (absolute).

        Yields the slot; a turn not admitted must not run its sources.
        """
        start = anyio.current_time()
        if self._limiter is None:
            yield Slot(admitted=True, queued=0.0)
            return
        token = object()
        admitted = await self._acquire(token, deadline - self._service)
        served_from = anyio.current_time()
        try:
            yield Slot(admitted=admitted, queued=served_from - start)
        finally:
            if admitted:
                self._limiter.release_on_behalf_of(token)
                self._observe(anyio.current_time() - served_from)

    async def _acquire(self, token: object, latest: float) -> bool:
        assert self._limiter is not None  # noqa: S101 - only called with a limiter
        try:
            self._limiter.acquire_on_behalf_of_nowait(token)
        except anyio.WouldBlock:
            pass
        else:
            return True
        with anyio.move_on_at(latest):
            await self._limiter.acquire_on_behalf_of(token)
            return True
        return False

    def _observe(self, seconds: float) -> None:
        first = self._service == 0.0
        self._service = seconds if first else self._service + _SMOOTHING * (seconds - self._service)


__all__ = ["Slot", "TurnQueue", "default_max_turns"]
