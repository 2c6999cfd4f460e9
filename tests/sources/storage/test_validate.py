"""Validation at the API boundary: ids without hidden characters, short names, and request values
whose attrs validators report every field at once."""

from __future__ import annotations

import attrs
import pytest

from broker import MAX_TEXT_CHARS, FieldError, Namespace, ValidationError
from sources import MAX_TEXT_CHARS as SOURCES_MAX_TEXT_CHARS
from sources.storage._validate import build, check, choice, collect, id_errors, key_errors


@pytest.mark.parametrize("value", ["m1\n2026-01-01  create", "m\u200b1", "m1\u202e", "m\t1", "m\x1b[2J1"])
def test_an_id_with_a_control_or_invisible_character_is_refused(value):
    """A newline, zero-width, bidi, tab or escape character in an id is an `invisible` field error."""
    assert [(e.field, e.code) for e in id_errors("id", value)] == [("id", "invisible")]


@pytest.mark.parametrize(
    "value", ["m1", "2026-01-01:note", "f052fa60-9f8d-4525-9983-a9a95a07e48d", "Zürich-1"]
)
def test_a_visible_id_passes(value):
    """Ordinary ids of any script pass."""
    assert id_errors("id", value) == []


def test_the_store_refuses_an_id_with_a_newline_and_writes_nothing(make_store):
    """The write fails as a ValidationError naming the field; the namespace stays empty (both engines)."""
    store = make_store(mode="lexical")
    ns = Namespace(tenant_id="acme")
    with pytest.raises(ValidationError) as caught:
        store.add_entry("a note", namespace=ns, id="m1\nforged")
    assert [(e.field, e.code) for e in caught.value.errors] == [("id", "invisible")]
    assert store.stats(namespace=ns)["entries"] == 0


def test_the_text_limit_is_defined_once_in_broker():
    """The store re-exports the broker's limit: the store and the gather boundary agree."""
    assert SOURCES_MAX_TEXT_CHARS == MAX_TEXT_CHARS == 32_000


# -- request values: attrs validators that report every field at once ------------------------


def _positive(field, value):
    return (
        [] if isinstance(value, int) and value > 0 else [FieldError(field=field, code="bad", message="> 0")]
    )


def _below_high(_instance, attribute, value):
    """A rule that reads another field of the value: `low` must stay below `high`."""
    if isinstance(value, int) and value >= _instance.high:
        raise ValidationError.single(attribute.name, "order", "must be below high")


@attrs.frozen(kw_only=True)
class _Range:
    low: int = attrs.field(default=1, validator=[check(_positive), _below_high])
    high: int = attrs.field(default=10, validator=check(_positive))
    unit: str = attrs.field(default="s", validator=check(choice(("s", "ms"))))


def test_build_reports_every_invalid_field_not_only_the_first():
    """Where attrs stops at the first failing validator, `build` names every field, in field order."""
    with pytest.raises(ValidationError) as caught:
        build(_Range, {"low": 0, "high": -1, "unit": "h"})
    assert [(e.field, e.code) for e in caught.value.errors] == [
        ("low", "bad"),
        ("high", "bad"),
        ("unit", "invalid_choice"),
    ]


def test_collect_lets_a_validator_read_the_other_fields_and_uses_the_defaults():
    """A rule across fields sees the given values, and the defaults for the fields left out."""
    assert [(e.field, e.code) for e in collect(_Range, {"low": 20})] == [("low", "order")]
    assert collect(_Range, {"low": 20, "high": 30}) == []
    assert build(_Range, {"low": 2}) == _Range(low=2)


def test_collect_refuses_a_name_that_is_not_a_field():
    """A misspelt field is a TypeError, as calling the class would be, not a silent pass."""
    with pytest.raises(TypeError, match="lo"):
        collect(_Range, {"lo": 1})


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("", "invalid_value"),
        (" ", "invalid_value"),
        ("a" * 201, "invalid_value"),
        ("a\x00", "invalid_value"),
        (7, "invalid_value"),
        ("don\nna", "invisible"),
        ("donna", None),
    ],
)
def test_key_errors_refuse_empty_long_and_invisible_names(value, code):
    """A short name is a non-empty string within its limit; `visible` also refuses hidden characters."""
    assert [e.code for e in key_errors("persona", value, maximum=200, visible=True)] == (
        [code] if code else []
    )
