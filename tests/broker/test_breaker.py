"""The circuit breaker: pure state transitions on a clock the test owns."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize(
    ("threshold", "cooldown", "max_cooldown"), [(0, 1.0, 30.0), (1, -1.0, 30.0), (1, 5.0, 2.0)]
)
def test_rejects_nonsense_settings(threshold, cooldown, max_cooldown):
    """A threshold below one, a negative cooldown or a ceiling under it is a configuration error."""
    with pytest.raises(ValueError):
        CircuitBreaker(threshold=threshold, cooldown=cooldown, max_cooldown=max_cooldown)


def test_the_default_cooldown_is_short():
    """A source that recovers is asked again a second after it tripped, not 30 s later."""
    b = CircuitBreaker()
    for _ in range(b.threshold):
        b.record_failure(0.0)
    assert not b.allow(0.999)
    assert b.allow(1.0)


def test_each_failed_probe_doubles_the_cooldown_up_to_the_ceiling():
    """1, 2, 4, 8, 16, 30, 30 s: a source that stays broken costs one probe per 30 s."""
    b = CircuitBreaker(threshold=1, cooldown=1.0, max_cooldown=30.0)
    now, waits = 0.0, []
    b.record_failure(now)
    for _ in range(7):
        waits.append(b.open_for)
        assert not b.allow(now + b.open_for - 0.001)
        now += b.open_for
        assert b.allow(now)
        b.record_failure(now)
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_successful_probe_resets_the_cooldown():
    """After recovering, the next trip starts from the short cooldown again."""
    b = CircuitBreaker(threshold=1, cooldown=1.0)
    b.record_failure(0.0)
    assert b.allow(1.0)
    b.record_failure(1.0)
    assert b.open_for == 2.0
    assert b.allow(3.0)
    b.record_success()
    b.record_failure(10.0)
    assert b.open_for == 1.0


def test_inconclusive_outcomes_never_open_it():
    """Contention, overload and callers giving up say nothing about the source."""
    b = CircuitBreaker(threshold=1)
    for _ in range(100):
        b.record_inconclusive()
    assert b.state(0.0) is BreakerState.CLOSED
    assert b.failures == 0


_EVENTS = st.lists(
    st.tuples(st.sampled_from(["ask", "ok", "fail", "inconclusive"]), st.floats(0.0, 5.0)), max_size=60
)


@settings(max_examples=500)
@given(
    events=_EVENTS,
    threshold=st.integers(1, 4),
    cooldown=st.floats(0.0, 3.0),
    ceiling=st.floats(0.0, 40.0),
)
def test_the_breaker_follows_its_model(events, threshold, cooldown, ceiling):
    """Against a plain model: it opens only on `threshold` failures in a row or a failed probe,
    stays out for min(cooldown * 2^(trips-1), max), lets one probe through, and closes on success."""
    b = CircuitBreaker(threshold=threshold, cooldown=cooldown, max_cooldown=cooldown + ceiling)
    now, failures, trips, opened_at, probing = 0.0, 0, 0, None, False
    for event, dt in events:
        now += dt
        wait = min(cooldown * 2 ** max(trips - 1, 0), cooldown + ceiling)
        is_open = opened_at is not None and now < opened_at + wait
        if event == "ask":
            expected = opened_at is None or (not is_open and not probing)
            assert b.allow(now) is expected
            probing = probing or (opened_at is not None and expected)
        elif event == "ok":
            b.record_success()
            failures, trips, opened_at, probing = 0, 0, None, False
        elif event == "fail":
            b.record_failure(now)
            failures += 1
            if probing or failures >= threshold:
                trips, opened_at = trips + 1, now
            probing = False
        else:
            b.record_inconclusive()
            probing = False
        assert b.failures == failures
        assert b.open_for <= cooldown + ceiling
