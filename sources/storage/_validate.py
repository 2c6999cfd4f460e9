"""Validation of memory input at the API boundary: every field error at once, nothing written."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, TypeVar

import attrs

import broker
from broker import MAX_ID_CHARS, FieldError, ValidationError, invisible_errors
from broker import text_errors as text_errors  # noqa: PLC0414 - re-exported: the one text rule
from broker.log import get_logger

MAX_TEXT_CHARS = broker.MAX_TEXT_CHARS
"""Longest memory text accepted, in characters: the broker's limit, defined once there."""

logger = get_logger(__name__)

T = TypeVar("T")
R = TypeVar("R")
Rule = Callable[[str, Any], list[FieldError]]
"""A field's rule: its name and value -> its errors (empty when valid)."""
Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]
"""An attrs validator: (instance, attribute, value) -> None, or raise."""

MAX_METADATA_BYTES = 64_000
"""Largest metadata object accepted, as compact JSON bytes."""
KINDS: tuple[str, ...] = ("note", "neuron", "memorule", "message", "document")
"""Kinds of entries the store accepts."""


def choice_errors(field: str, value: object, allowed: tuple[str, ...], *, optional: bool) -> list[FieldError]:
    """Problems with an enumerated field."""
    if value is None and optional:
        return []
    if value not in allowed:
        return [
            FieldError(
                field=field,
                code="invalid_choice",
                message=f"must be one of {', '.join(allowed)}; got {value!r}",
            )
        ]
    return []


def choice(allowed: tuple[str, ...], *, optional: bool = False) -> Rule:
    """The rule of an enumerated field (`choice_errors`)."""

    def rule(field: str, value: object) -> list[FieldError]:
        return choice_errors(field, value, allowed, optional=optional)

    return rule


def id_errors(field: str, value: object) -> list[FieldError]:
    """Problems with a caller-supplied id."""
    if value is None:
        return []
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
        return [
            FieldError(
                field=field,
                code="invalid_id",
                message=f"must be a non-empty string of at most {MAX_ID_CHARS} chars",
            )
        ]
    return invisible_errors(field, value)


def key_errors(field: str, value: object, *, maximum: int, visible: bool = False) -> list[FieldError]:
    """Problems with a short name: a non-empty string of at most `maximum` chars, no NUL (and,
    if `visible`, no control or invisible character)."""
    if not isinstance(value, str) or not value.strip() or len(value) > maximum or "\x00" in value:
        message = f"must be a non-empty string of at most {maximum} chars"
        return [FieldError(field=field, code="invalid_value", message=message)]
    return invisible_errors(field, value) if visible else []


def min_text_errors(field: str, value: object, minimum: int) -> list[FieldError]:
    """Problems with a text that must hold at least `minimum` characters besides spaces."""
    errors = text_errors(field, value)
    if not errors and isinstance(value, str) and len(value.strip()) < minimum:
        errors.append(FieldError(field=field, code="too_short", message=f"must be at least {minimum} chars"))
    return errors


def normalise_created_at(value: object) -> tuple[str | None, list[FieldError]]:
    """An ISO-8601 timestamp in UTC, `now` when absent."""
    if value is None:
        return datetime.now(UTC).isoformat(timespec="microseconds"), []
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None, [
                FieldError(field="created_at", code="invalid_timestamp", message="must be ISO-8601")
            ]
    else:
        return None, [FieldError(field="created_at", code="invalid_timestamp", message="must be ISO-8601")]
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds"), []


def prefixed(errors: list[FieldError], prefix: str) -> list[FieldError]:
    """The errors with `prefix` (an item's place in a batch, `[i].`) before each field."""
    return [attrs.evolve(e, field=f"{prefix}{e.field}") for e in errors] if prefix else errors


def importance_errors(value: object) -> list[FieldError]:
    """Importance is a finite number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return [FieldError(field="importance", code="type", message="must be a number in [0, 1]")]
    if not 0.0 <= value <= 1.0:
        return [FieldError(field="importance", code="out_of_range", message="must be in [0, 1]")]
    return []


def encode_metadata(value: object) -> tuple[str, list[FieldError]]:
    """Metadata as compact JSON: an object of JSON values, bounded in size."""
    if value is None:
        return "{}", []
    if not isinstance(value, Mapping):
        return "", [FieldError(field="metadata", code="type", message="must be a JSON object")]
    try:
        encoded = json.dumps(dict(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        encoded.encode("utf-8")
    except (TypeError, ValueError) as exc:
        return "", [
            FieldError(field="metadata", code="not_json", message=f"must be JSON-serialisable: {exc}")
        ]
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        return "", [
            FieldError(
                field="metadata", code="too_large", message=f"must be at most {MAX_METADATA_BYTES} bytes"
            )
        ]
    return encoded, []


def batch_of(items: object, cls: type[T], namespace: object) -> list[T]:
    """A batch write's items as a list, after checking its shape: ValidationError (never an
    AttributeError deep in the write) for a namespace that is not a `Namespace`, a batch that
    is not an iterable of `cls` (one item alone, a string, a mapping), or an item of another type."""
    noun = cls.__name__
    if not isinstance(namespace, broker.Namespace):
        raise ValidationError.single("namespace", "type", "must be a Namespace")
    if isinstance(items, cls | str | bytes | Mapping) or not isinstance(items, Iterable):
        raise ValidationError.single("batch", "type", f"must be a list of {noun}, got {type(items).__name__}")
    listed = list(items)
    raise_if(
        [
            FieldError(field=f"[{i}]", code="type", message=f"must be a {noun}, got {type(x).__name__}")
            for i, x in enumerate(listed)
            if not isinstance(x, cls)
        ]
    )
    return listed


def exists_errors(ids: Iterable[str], namespace: object) -> list[FieldError]:
    """One error for each id the namespace already holds (a write without `replace`)."""
    return [
        FieldError(field="id", code="exists", message=f"id {i!r} already exists in {namespace}") for i in ids
    ]


def raise_if(errors: list[FieldError]) -> None:
    """Raise one ValidationError carrying every error, if any."""
    if errors:
        raise ValidationError(errors)


# -- request values: attrs validators that report every field at once ------------------------
#
# A validator raises a ValidationError of its field's errors, so attrs stops at the first
# invalid field. `collect` runs every validator of a class over the values instead (on a plain
# namespace standing for the instance, so a validator may read the other fields) and gathers
# their errors in field order; `build` makes the value, or raises them all.


def check(rule: Rule) -> Validator:
    """The attrs validator of a field's `rule`."""

    def validate(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        raise_if(rule(attribute.name, value))

    return validate


def collect(cls: type[Any], values: Mapping[str, object]) -> list[FieldError]:
    """Every error the validators of attrs class `cls` find in `values` (field -> value; the
    defaults stand for those absent, no converter runs); TypeError for a name that is not a field."""
    fields = attrs.fields(cls)
    unknown = sorted(set(values) - {a.name for a in fields})
    if unknown:
        msg = f"{cls.__name__} has no field {', '.join(unknown)}"
        raise TypeError(msg)
    draft = SimpleNamespace(**{a.name: values.get(a.name, _default(a)) for a in fields})
    errors: list[FieldError] = []
    for a in fields:
        try:
            if a.validator is not None:
                a.validator(draft, a, getattr(draft, a.name))
        except ValidationError as exc:
            errors += exc.errors
    return errors


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """An instance of attrs class `cls`; ValidationError with every field's errors if invalid."""
    try:
        return cls(**values)
    except ValidationError as exc:
        raise ValidationError(collect(cls, values) or exc.errors) from None


def _default(a: attrs.Attribute[Any]) -> object:
    default: Any = a.default
    return default.factory() if isinstance(default, attrs.Factory) else default  # type: ignore[arg-type] # attrs types Factory as a function


class DamagedRowError(ValueError):
    """Raised when a stored row does not decode (a JSON column that is not JSON).

    Readers skip such a row with `skip_damaged`, which logs it with its id, and serve the rest.
    """


def decode_json(raw: str | None, *, column: str, default: str) -> Any:  # noqa: ANN401 - any JSON value
    """A stored JSON column (`default` when empty); DamagedRowError if it is not JSON."""
    try:
        return json.loads(raw or default)
    except (TypeError, ValueError) as exc:
        raise DamagedRowError(f"{column} is not valid JSON") from exc


def decode_metadata(raw: str | None) -> dict[str, Any]:
    """Metadata as stored; DamagedRowError if it is not JSON."""
    if not raw or raw == "{}":  # most rows: no metadata, and no JSON to parse
        return {}
    value = decode_json(raw, column="metadata", default="{}")
    return value if isinstance(value, dict) else {}


def skip_damaged(
    items: Iterable[T], build: Callable[[T], R], *, table: str, row_id: Callable[[T], object]
) -> Iterator[R]:
    """Build each item lazily, skipping (and logging, with its id) rows that are damaged."""
    for item in items:
        try:
            yield build(item)
        except DamagedRowError as exc:
            logger.warning("store.row_damaged", table=table, id=str(row_id(item)), error=str(exc))


def check_keywords(function: str, given: Iterable[str], allowed: Iterable[str]) -> None:
    """Raise TypeError, as Python does for a named parameter, for each keyword of `given` that is
    not `allowed` (functions whose options are a `**kwargs` typed by a TypedDict)."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        msg = f"{function}() got unexpected keyword arguments: {', '.join(unknown)}"
        raise TypeError(msg)
