"""Field rules shared by every entry point: the selector's request, the turn, the options of
`open_selector` and `open_broker`, and the store's writes and recall refuse the same input
with the same field errors.

A `Rule` is a check built on `attrs.validators`, usable three ways: as an attrs field
validator (raising ValidationError that names the field), as field errors to collect with
others (`errors`), or as the line of a ConfigError (`problem`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias, cast

import attrs

from ._exceptions import FieldError, ValidationError
from ._text import hidden_character

MAX_TEXT_CHARS = 32_000
"""Longest memory text, in characters: the store refuses longer writes, and the broker cuts
a longer candidate text from any source to this length at the gather boundary."""

MAX_ID_CHARS = 200
"""Longest id (of a memory, task or namespace part), in characters."""

MAX_BUDGET = 1000
"""Most memories one request may ask for (a source returns at most this many)."""

RECALL_MODES: tuple[str, ...] = ("lexical", "dense", "hybrid")
"""Recall modes; every one floors the same calibrated probability."""


Validator: TypeAlias = Callable[[Any, "attrs.Attribute[Any]", Any], Any]
"""An attrs validator: `(instance, attribute, value)`, raising on a bad value."""


def all_of(*validators: Any) -> Validator:  # noqa: ANN401 - any attrs validator
    """Every validator, in order (`attrs.validators.and_`)."""
    return attrs.validators.and_(*validators)


@attrs.frozen
class _Named:
    """What an attrs validator reads of the attribute it checks: its name."""

    name: str


@attrs.frozen
class Rule:
    """One check (an `attrs.validators` validator) with the field error it stands for."""

    code: str
    message: str
    check: Validator

    def holds(self, value: object) -> bool:
        """True when `value` passes."""
        try:
            self.check(None, cast("attrs.Attribute[Any]", _Named("value")), value)
        except (TypeError, ValueError):
            return False
        return True

    def errors(self, field: str, value: object) -> list[FieldError]:
        """The field error of `value`, or none."""
        return [] if self.holds(value) else [FieldError(field=field, code=self.code, message=self.message)]

    def problem(self, label: str, value: object) -> list[str]:
        """`value`'s problem as a line of a ConfigError, or none."""
        return [] if self.holds(value) else [f"{label} {self.message}"]

    def optional(self) -> Rule:
        """The rule, with None allowed."""
        return Rule(self.code, f"{self.message} or None", attrs.validators.optional(self.check))

    def __call__(self, _instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        """As an attrs validator: raise ValidationError naming the field."""
        if not self.holds(value):
            raise ValidationError.single(attribute.name, self.code, self.message)


_NOT_BOOL = attrs.validators.not_(attrs.validators.instance_of(bool))


def integer(low: int, high: int | None = None, *, code: str = "range") -> Rule:
    """An integer (not a bool) >= `low`, and <= `high` when given."""
    whole = all_of(_NOT_BOOL, attrs.validators.instance_of(int), attrs.validators.ge(low))
    if high is None:
        return Rule(code, f"must be an integer >= {low}", whole)
    return Rule(code, f"must be an integer in {low}..{high}", all_of(whole, attrs.validators.le(high)))


def seconds(*, zero: bool = False) -> Rule:
    """A finite number of seconds, > 0 (or >= 0 with `zero`)."""
    low = attrs.validators.ge(0) if zero else attrs.validators.gt(0)
    check = all_of(_NOT_BOOL, attrs.validators.instance_of((int, float)), low, attrs.validators.lt(math.inf))
    return Rule("range", f"must be a number of seconds {'>=' if zero else '>'} 0", check)


def one_of(choices: Iterable[str]) -> Rule:
    """One of `choices`."""
    allowed = tuple(choices)
    return Rule("unknown", f"must be one of {', '.join(allowed)}", attrs.validators.in_(allowed))


def _non_blank(_instance: object, _attribute: object, value: str) -> None:
    if not value.strip():
        raise ValueError(value)


NON_EMPTY = Rule(
    "empty",
    "must be a non-empty string",
    all_of(attrs.validators.instance_of(str), _non_blank),
)
"""A string with something but spaces in it."""

PROBABILITY = Rule(
    "range",
    "must be a probability in [0, 1]",
    all_of(attrs.validators.instance_of((int, float)), attrs.validators.ge(0.0), attrs.validators.le(1.0)),
)
"""A number in [0, 1] (NaN is not): a calibrated score."""

POSITIVE = integer(1)
NON_NEGATIVE = integer(0)
SECONDS = seconds()
MODE = one_of(RECALL_MODES)


def invisible_errors(field: str, value: str) -> list[FieldError]:
    """A control or invisible character in an id or a name (`a\u200bcme`), named by its code point."""
    hidden = hidden_character(value)
    if hidden is None:
        return []
    message = f"must not contain control or invisible characters (found U+{ord(hidden):04X})"
    return [FieldError(field=field, code="invisible", message=message)]


def text_errors(field: str, text: object, *, max_chars: int = MAX_TEXT_CHARS) -> list[FieldError]:
    """Problems with a text field: type, emptiness, size, NUL bytes, lone surrogates."""
    if not isinstance(text, str):
        return [FieldError(field=field, code="type", message="must be a string")]
    errors: list[FieldError] = []
    if not text.strip():
        errors.append(FieldError(field=field, code="empty", message="must not be empty"))
    if len(text) > max_chars:
        errors.append(FieldError(field=field, code="too_long", message=f"must be at most {max_chars} chars"))
    if "\x00" in text:
        errors.append(FieldError(field=field, code="nul", message="must not contain NUL bytes"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        errors.append(
            FieldError(field=field, code="encoding", message="must be valid Unicode (no lone surrogates)")
        )
    return errors


def count_errors(
    field: str, value: object, *, minimum: int = 1, maximum: int | None = MAX_BUDGET
) -> list[FieldError]:
    """Problems with a count (a limit, a budget): an integer in minimum..maximum (None: no top)."""
    return integer(minimum, maximum, code="out_of_range").errors(field, value)
