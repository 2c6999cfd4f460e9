"""The rules of a memorule's fields and of its writer: every problem at once, nothing written.

Each rule takes a field's name and value and returns its `FieldError`s (empty when valid):
`remember`'s request value (`sources._remember.MemoryWrite`) declares them as attrs
validators, and `update_memorule` checks the fields it changes with the same rules.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from broker import FieldError
from sources.storage import _validate

from ._values import (
    APPLIES_TO_KEYS,
    CONFIDENCE_LEVELS,
    FIELD_NAMES,
    MAX_KEY_CHARS,
    MEMORULE_KINDS,
    MIN_BODY_CHARS,
    MIN_SUBJECT_CHARS,
    REQUIRED_FIELDS,
    SCOPES,
    WriterSession,
)

WRITER_FIELDS = ("session_id", "persona")


def required_errors(field: str) -> list[FieldError]:
    """The error of a memorule field left out."""
    return [FieldError(field=field, code="required", message="is required for kind 'memorule'")]


def _key_value_errors(key: str, value: object) -> list[FieldError]:
    errors = _validate.key_errors("applies_to", value, maximum=MAX_KEY_CHARS)
    if errors:
        return [attrs.evolve(e, message=f"{key} {e.message}") for e in errors]
    if key == "scope" and value not in SCOPES:
        message = f"scope must be one of {', '.join(SCOPES)}; got {value!r}"
        return [FieldError(field="applies_to", code="invalid_choice", message=message)]
    return []


def applies_to_errors(field: str, value: object) -> list[FieldError]:
    """Problems with `applies_to`: an object of known keys, at least one, each a valid value."""
    if not isinstance(value, Mapping):
        return [FieldError(field=field, code="type", message="must be an object of key -> string")]
    allowed = ", ".join(APPLIES_TO_KEYS)
    errors = [
        FieldError(field=field, code="unknown_key", message=f"unknown key {k!r}; allowed: {allowed}")
        for k in value
        if k not in APPLIES_TO_KEYS
    ]
    if not any(k in value for k in APPLIES_TO_KEYS):
        errors.append(FieldError(field=field, code="empty", message=f"must set at least one of {allowed}"))
    for key in APPLIES_TO_KEYS:
        if key in value:
            errors += _key_value_errors(key, value[key])
    return errors


def _subject_errors(field: str, value: object) -> list[FieldError]:
    return _validate.min_text_errors(field, value, MIN_SUBJECT_CHARS)


def _body_errors(field: str, value: object) -> list[FieldError]:
    return _validate.min_text_errors(field, value, MIN_BODY_CHARS)


FIELD_RULES: Mapping[str, _validate.Rule] = {
    "memorule_kind": _validate.choice(MEMORULE_KINDS),
    "subject": _subject_errors,
    "body": _body_errors,
    "applies_to": applies_to_errors,
    "confidence": _validate.choice(CONFIDENCE_LEVELS),
    "evidence_signal_id": _validate.id_errors,
}
"""The rule of each given (non-None) memorule field."""


def field_errors(field: str, value: object, *, partial: bool = False) -> list[FieldError]:
    """Problems with one memorule field; None is missing (a required field) unless `partial`,
    where it means unchanged."""
    if value is None:
        return required_errors(field) if not partial and field in REQUIRED_FIELDS else []
    return FIELD_RULES[field](field, value)


def combined_errors(subject: object, body: object) -> list[FieldError]:
    """Subject and body are one text, which must fit the store's limit."""
    if not isinstance(subject, str) or not isinstance(body, str):
        return []
    if len(subject) + 1 + len(body) > _validate.MAX_TEXT_CHARS:
        message = f"subject and body together must be at most {_validate.MAX_TEXT_CHARS} chars"
        return [FieldError(field="body", code="too_long", message=message)]
    return []


def fields_errors(fields: Mapping[str, object], *, partial: bool = False) -> list[FieldError]:
    """Every problem with a memorule's fields (field -> value; absent is None)."""
    errors: list[FieldError] = []
    for field in FIELD_NAMES:
        errors += field_errors(field, fields.get(field), partial=partial)
    if not errors:
        errors += combined_errors(fields.get("subject"), fields.get("body"))
    return errors


def memorule_errors(*, partial: bool = False, **fields: object) -> list[FieldError]:
    """Every problem with the fields of a memorule (empty when valid); writes nothing.

    The fields are `memorule_kind`, `subject`, `body`, `applies_to`, `evidence_signal_id` and
    `confidence`. `partial=True` checks the fields of an update: None means unchanged, not missing.
    """
    _validate.check_keywords("memorule_errors", fields, FIELD_NAMES)
    return fields_errors(fields, partial=partial)


def session_errors(session: object) -> list[FieldError]:
    """Problems with the writing session; None is one too: every memorule write names its writer."""
    if session is None:
        message = "is required to write a memorule (who wrote it)"
        return [FieldError(field=f, code="required", message=message) for f in WRITER_FIELDS]
    if not isinstance(session, WriterSession):
        message = "must be a WriterSession(session_id, persona)"
        return [FieldError(field="session", code="type", message=message)]
    errors: list[FieldError] = []
    for field in WRITER_FIELDS:
        # Printed in `audit` and `history`: a newline here would forge a line of output.
        errors += _validate.key_errors(field, getattr(session, field), maximum=MAX_KEY_CHARS, visible=True)
    return errors
