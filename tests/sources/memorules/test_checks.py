"""Tests of the rules of a memorule's fields and of its writer."""

from __future__ import annotations

import pytest

from sources import WriterSession, memorule_errors, session_errors


def test_a_partial_check_takes_absent_fields_as_unchanged() -> None:
    """An update names only what changes; a create must name every required field."""
    assert memorule_errors(partial=True, subject="Staging first") == []
    assert {(e.field, e.code) for e in memorule_errors(subject="Staging first")} == {
        ("memorule_kind", "required"),
        ("body", "required"),
        ("applies_to", "required"),
    }


def test_memorule_errors_refuse_a_field_a_memorule_does_not_have() -> None:
    """A misspelt field is a TypeError, not a field silently left unchecked."""
    with pytest.raises(TypeError, match="subjcet"):
        memorule_errors(subjcet="Staging first")


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        (WriterSession(session_id="s-1", persona="donna"), []),
        (WriterSession(session_id="s\n1", persona="donna"), [("session_id", "invisible")]),
        (WriterSession(session_id="s-1", persona="x" * 201), [("persona", "invalid_value")]),
        (("s-1", "donna"), [("session", "type")]),
    ],
)
def test_a_writer_is_checked_field_by_field(session: object, expected: list[tuple[str, str]]) -> None:
    """Session id and persona are printed in `audit` and `history`: short, visible, and a WriterSession."""
    assert [(e.field, e.code) for e in session_errors(session)] == expected
