"""A circuit breaker per source.

A source that keeps failing is left alone for a cooldown so it stops eating the turn deadline,
then probed with one request before it is trusted again.
"""

from __future__ import annotations

import enum

import attrs

DEFAULT_THRESHOLD = 3
DEFAULT_COOLDOWN = 30.0


class BreakerState(enum.StrEnum):
    """Where a breaker stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@attrs.define(eq=False)
class CircuitBreaker:
    """Counts consecutive failures (errors and timeouts) of one source.

    `threshold` consecutive failures open the breaker for `cooldown` seconds of the event
    loop's clock; after that one probe is let through: success closes it, failure re-opens it.
    Times are passed in (`now`) so the breaker stays pure and the tests own the clock.
    """

    threshold: int = attrs.field(default=DEFAULT_THRESHOLD, validator=attrs.validators.ge(1))
    cooldown: float = attrs.field(default=DEFAULT_COOLDOWN, validator=attrs.validators.ge(0.0))
    _failures: int = attrs.field(default=0, init=False)
    _opened_at: float | None = attrs.field(default=None, init=False)
    _probing: bool = attrs.field(default=False, init=False)

    @property
    def failures(self) -> int:
        """Consecutive failures so far."""
        return self._failures

    def state(self, now: float) -> BreakerState:
        """Return the state at clock time `now`."""
        if self._opened_at is None:
            return BreakerState.CLOSED
        if now < self._opened_at + self.cooldown:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    def allow(self, now: float) -> bool:
        """May the source be asked now? In half-open state only one probe is in flight."""
        state = self.state(now)
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.OPEN or self._probing:
            return False
        self._probing = True
        return True

    def record_success(self) -> None:
        """Close the breaker: the source answered (with or without candidates)."""
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def record_failure(self, now: float) -> None:
        """Count a failure (error or timeout); open on the threshold or a failed probe."""
        self._failures += 1
        if self._probing or self._failures >= self.threshold:
            self._opened_at = now
        self._probing = False

    def record_abandoned(self) -> None:
        """Free the probe slot: the caller gave up, which says nothing about the source."""
        self._probing = False
