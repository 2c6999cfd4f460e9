"""Tool inputs as data: one table of fields per tool gives both its JSON Schema and its checks.

The checks here are only the JSON types (and unknown or missing fields), reported as the
CLI reports them: one `FieldError(field, code, message)` each, all at once. What a value
means (a known memory type, a budget >= 1, a memorule's fields) is checked by the library
call the tool makes, so the MCP server and the CLI give the same errors for the same input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from broker import FieldError, ValidationError

_SCHEMAS: Mapping[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "strings": {"type": "array", "items": {"type": "string"}},
    "string_map": {"type": "object", "additionalProperties": {"type": "string"}},
}
_MESSAGES: Mapping[str, str] = {
    "string": "must be a string",
    "integer": "must be an integer",
    "number": "must be a number",
    "strings": "must be a list of strings",
    "string_map": "must be an object of string values",
}


@attrs.frozen(kw_only=True)
class Field:
    """One input of a tool."""

    name: str
    type: str = attrs.field(validator=attrs.validators.in_(tuple(_SCHEMAS)))
    description: str
    required: bool = False
    enum: tuple[str, ...] | None = None
    """Shown in the schema; the library call checks it (so its error is the CLI's)."""


def input_schema(fields: tuple[Field, ...]) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments."""
    properties = {}
    for f in fields:
        prop = {**_SCHEMAS[f.type], "description": f.description}
        if f.enum is not None:
            prop["enum"] = list(f.enum)
        properties[f.name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": [f.name for f in fields if f.required],
        "additionalProperties": False,
    }


def parse(fields: tuple[Field, ...], arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments that were given, type-checked; ValidationError lists every problem."""
    given = dict(arguments or {})
    known = {f.name: f for f in fields}
    errors = [FieldError(field=k, code="unknown", message="unknown field") for k in given if k not in known]
    for f in fields:
        if given.get(f.name) is None:
            given.pop(f.name, None)
            if f.required:
                errors.append(FieldError(field=f.name, code="required", message="is required"))
        elif not _is(f.type, given[f.name]):
            errors.append(FieldError(field=f.name, code="type", message=_MESSAGES[f.type]))
    if errors:
        raise ValidationError(errors)
    return given


def _is(kind: str, value: object) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )
