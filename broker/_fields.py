"""Field rules shared by every entry point that takes text: the selector's request and the
store's writes and recall refuse the same input with the same field errors."""

from __future__ import annotations

from ._exceptions import FieldError
from ._model import MAX_TEXT_CHARS

MAX_BUDGET = 1000
"""Most memories one request may ask for (a source returns at most this many)."""


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


def count_errors(field: str, value: object, *, maximum: int = MAX_BUDGET) -> list[FieldError]:
    """Problems with a count (a limit, a budget): an integer in 1..maximum."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        return [FieldError(field=field, code="out_of_range", message=f"must be an integer in 1..{maximum}")]
    return []
