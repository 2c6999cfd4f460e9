"""The circuit breaker: pure state transitions on a clock the test owns."""

from __future__ import annotations

import pytest

from broker._breaker import BreakerState, CircuitBreaker


def test_opens_after_threshold_consecutive_failures():
    """Three failures in a row trip it: the source stops eating the deadline."""
    b = CircuitBreaker(threshold=3, cooldown=30.0)
    for now in (1.0, 2.0):
        b.record_failure(now)
        assert b.allow(now)
    b.record_failure(3.0)
    assert b.state(3.0) is BreakerState.OPEN
    assert not b.allow(3.0)
    assert not b.allow(32.9)


def test_a_success_resets_the_count():
    """Failures must be consecutive: one success in between keeps it closed."""
    b = CircuitBreaker(threshold=3)
    b.record_failure(0.0)
    b.record_failure(0.0)
    b.record_success()
    b.record_failure(0.0)
    b.record_failure(0.0)
    assert b.state(0.0) is BreakerState.CLOSED
    assert b.failures == 2


def test_half_open_lets_exactly_one_probe_through():
    """After the cooldown one request probes; others stay out until it settles."""
    b = CircuitBreaker(threshold=1, cooldown=30.0)
    b.record_failure(0.0)
    assert b.state(30.0) is BreakerState.HALF_OPEN
    assert b.allow(30.0)
    assert not b.allow(30.0)


def test_successful_probe_closes():
    """A probe that answers closes the breaker for everyone."""
    b = CircuitBreaker(threshold=1, cooldown=30.0)
    b.record_failure(0.0)
    assert b.allow(30.0)
    b.record_success()
    assert b.state(30.0) is BreakerState.CLOSED
    assert b.allow(30.0)
    assert b.allow(30.0)


def test_failed_probe_reopens_for_a_full_cooldown():
    """A failed probe re-opens the breaker, counted from the probe's failure."""
    b = CircuitBreaker(threshold=3, cooldown=30.0)
    for _ in range(3):
        b.record_failure(0.0)
    assert b.allow(30.0)
    b.record_failure(31.0)
    assert b.state(31.0) is BreakerState.OPEN
    assert not b.allow(60.9)
    assert b.allow(61.0)


def test_abandoned_probe_frees_the_slot():
    """A probe the caller gave up on says nothing about the source; another may probe."""
    b = CircuitBreaker(threshold=1, cooldown=5.0)
    b.record_failure(0.0)
    assert b.allow(5.0)
    b.record_abandoned()
    assert b.state(5.0) is BreakerState.HALF_OPEN
    assert b.allow(5.0)


@pytest.mark.parametrize(("threshold", "cooldown"), [(0, 1.0), (1, -1.0)])
def test_rejects_nonsense_settings(threshold, cooldown):
    """A threshold below one or a negative cooldown is a configuration error."""
    with pytest.raises(ValueError):
        CircuitBreaker(threshold=threshold, cooldown=cooldown)
