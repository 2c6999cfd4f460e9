"""Tool inputs as data: the schema a client sees and the type checks, from one table."""

from __future__ import annotations

import pytest

from broker import ValidationError
from context_broker.mcp._fields import Field, input_schema, parse

FIELDS = (
    Field(name="query", type="string", description="q", required=True),
    Field(name="limit", type="integer", description="l"),
    Field(name="types", type="strings", description="t", enum=None),
    Field(name="applies_to", type="string_map", description="a"),
    Field(name="importance", type="number", description="i"),
)


def test_schema_is_strict():
    """Required fields are listed and unknown ones are not allowed."""
    schema = input_schema(FIELDS)
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["types"] == {"type": "array", "items": {"type": "string"}, "description": "t"}


def test_given_arguments_pass_and_nulls_are_absent():
    """Well-typed arguments come back as given; a null means not given."""
    assert parse(FIELDS, {"query": "x", "limit": 3, "importance": 1, "types": None}) == {
        "query": "x",
        "limit": 3,
        "importance": 1,
    }


def test_every_type_problem_at_once():
    """Unknown, missing and mistyped fields (a bool is no integer) are all reported."""
    with pytest.raises(ValidationError) as caught:
        parse(
            FIELDS,
            {
                "tenant": "other",
                "limit": True,
                "types": ["a", 1],
                "applies_to": {"scope": 2},
                "importance": "hi",
            },
        )
    assert [(e.field, e.code) for e in caught.value.errors] == [
        ("tenant", "unknown"),
        ("query", "required"),
        ("limit", "type"),
        ("types", "type"),
        ("applies_to", "type"),
        ("importance", "type"),
    ]
