"""Field rules on attrs.validators: one rule, three uses (validator, field errors, config problem)."""

from __future__ import annotations

import math

import attrs
import pytest

from broker import FieldError, ValidationError, count_errors
from broker._fields import MODE, POSITIVE, SECONDS, integer, seconds


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "3", None])
def test_an_integer_rule_refuses_bools_floats_and_values_below_its_floor(value):
    """`integer(1)` is the one integer-range check: a bool is not an integer here."""
    assert not POSITIVE.holds(value)
    assert POSITIVE.holds(1)


def test_a_bounded_integer_rule_names_its_range():
    """`integer(1, 10)` says the range it wants, with the code it was given."""
    assert integer(1, 10, code="out_of_range").errors("budget", 11) == [
        FieldError(field="budget", code="out_of_range", message="must be an integer in 1..10")
    ]


@pytest.mark.parametrize("value", [0, -0.5, math.nan, math.inf, False])
def test_seconds_are_finite_and_positive(value):
    """A deadline of zero, NaN or infinity is refused; a cooldown may be zero."""
    assert not SECONDS.holds(value)
    assert seconds(zero=True).holds(0)


def test_a_rule_is_an_attrs_validator_raising_a_validation_error_naming_the_field():
    """As a field validator a rule raises ValidationError (a ValueError) for that field."""

    @attrs.frozen
    class Options:
        mode: str = attrs.field(validator=MODE)

    with pytest.raises(ValidationError) as caught:
        Options(mode="psychic")
    assert [(e.field, e.code) for e in caught.value.errors] == [("mode", "unknown")]


def test_a_rule_gives_the_line_of_a_config_error_and_may_allow_none():
    """`problem` gives one line a ConfigError lists; `optional` lets None through."""
    assert POSITIVE.problem("max_turns", 0) == ["max_turns must be an integer >= 1"]
    assert POSITIVE.optional().problem("max_turns", None) == []
    assert POSITIVE.optional().problem("max_turns", 0) == ["max_turns must be an integer >= 1 or None"]


def test_a_count_may_start_at_zero_and_have_no_top():
    """`count_errors` is the one count rule: a history limit may be 0, a cache size has no top."""
    assert count_errors("limit", 0, minimum=0, maximum=50) == []
    assert count_errors("limit", 51, minimum=0, maximum=50)[0].message == "must be an integer in 0..50"
    assert count_errors("result_cache", 10**9, minimum=0, maximum=None) == []
    assert count_errors("result_cache", -1, minimum=0, maximum=None)[0].code == "out_of_range"
