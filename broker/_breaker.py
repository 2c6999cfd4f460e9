"""A circuit breaker per source.

A source that keeps failing is left alone for a cooldown so it stops eating the turn deadline,
then probed with one request before it is trusted again.

What counts against a source is what the source did: an error, or hanging while the rest of
the turn answered. A timeout shared with other sources of the same turn is the turn's
deadline meeting a busy machine (contention), which says nothing about any one of them; it
never trips a breaker. The cooldown starts short and doubles with each failed probe, so a
source that recovers is back within a second, and one that stays broken costs one probe
every `max_cooldown` seconds.
"""

from __future__ import annotations

import enum

import attrs

DEFAULT_THRESHOLD = 3
DEFAULT_COOLDOWN = 1.0
DEFAULT_MAX_COOLDOWN = 30.0
_GROWTH = 2.0


class BreakerState(enum.StrEnum):
    """Where a breaker stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


def _at_least_cooldown(instance: CircuitBreaker, _attribute: object, value: float) -> None:
    if value < instance.cooldown:
        raise ValueError(f"max_cooldown ({value}) must be >= cooldown ({instance.cooldown})")


@attrs.define(eq=False)
class CircuitBreaker:
    """Counts consecutive failures of one source: errors, and hangs (late while others were not).

    `threshold` consecutive failures open the breaker for `cooldown` seconds of the event
    loop's clock; after that one probe is let through: success closes it (and resets the
    cooldown), failure re-opens it for twice the last cooldown, at most `max_cooldown`.
    Times are passed in (`now`) so the breaker stays pure and the tests own the clock.
    """

    threshold: int = attrs.field(default=DEFAULT_THRESHOLD, validator=attrs.validators.ge(1))
    cooldown: float = attrs.field(default=DEFAULT_COOLDOWN, validator=attrs.validators.ge(0.0))
    max_cooldown: float = attrs.field(default=DEFAULT_MAX_COOLDOWN, validator=_at_least_cooldown)
    _failures: int = attrs.field(default=0, init=False)
    _opened_at: float | None = attrs.field(default=None, init=False)
    _trips: int = attrs.field(default=0, init=False)
    _probing: bool = attrs.field(default=False, init=False)

    @property
    def failures(self) -> int:
        """Consecutive failures so far."""
        return self._failures

    @property
    def open_for(self) -> float:
        """The cooldown of the current (or next) opening, in seconds."""
        return min(self.cooldown * _GROWTH ** max(self._trips - 1, 0), self.max_cooldown)

    def state(self, now: float) -> BreakerState:
        """Return the state at clock time `now`."""
        if self._opened_at is None:
            return BreakerState.CLOSED
        if now < self._opened_at + self.open_for:
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
        self._trips = 0
        self._probing = False

    def record_failure(self, now: float) -> None:
        """Count a failure of the source (an error, or a hang); open on the threshold or a
        failed probe, each re-opening for longer than the last."""
        self._failures += 1
        if self._probing or self._failures >= self.threshold:
            self._trips += 1
            self._opened_at = now
        self._probing = False

    def record_inconclusive(self) -> None:
        """Free the probe slot and count nothing: the outcome says nothing about the source
        (the caller gave up, the mailbox was full, or the deadline cut several sources at once)."""
        self._probing = False

    def record_abandoned(self) -> None:
        """The caller gave up on the request: inconclusive."""
        self.record_inconclusive()
