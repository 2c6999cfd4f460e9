"""Namespace parts are normalised and checked: one spelling of a name, one tenant."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker import Namespace, ValidationError

SAME_TENANT = [
    "acme",
    "acme ",
    "  acme\u3000",  # ideographic space, trimmed
    "\uff41\uff43\uff4d\uff45",  # full-width
    "\uff21cme".lower(),
]


@pytest.mark.parametrize("spelling", SAME_TENANT)
def test_spellings_of_one_name_are_one_tenant(spelling):
    """Trailing spaces and full-width forms fold to one tenant (NFKC, trimmed)."""
    assert Namespace(tenant_id=spelling) == Namespace(tenant_id="acme")


def test_nfc_and_nfd_are_one_tenant():
    """A composed and a decomposed accent name the same project."""
    composed = unicodedata.normalize("NFC", "caf\u00e9")
    decomposed = unicodedata.normalize("NFD", "caf\u00e9")
    assert composed != decomposed
    assert Namespace(tenant_id="t", project_id=composed) == Namespace(tenant_id="t", project_id=decomposed)


@pytest.mark.parametrize(
    "part",
    ["a\u200bcme", "ac\u202eme", "ac\nme", "ac\tme", "a\x00cme", "ac\u2028me", "acme\u2800", "ac\ufe0fme"],
)
def test_invisible_or_control_characters_are_a_field_error(part):
    """A zero-width, bidi, control or blank look-alike character is refused with a FieldError."""
    with pytest.raises(ValidationError) as caught:
        Namespace(tenant_id=part)
    assert [(e.field, e.code) for e in caught.value.errors] == [("tenant_id", "invisible")]


def test_every_bad_part_is_reported_at_once_and_is_a_value_error():
    """Both parts' errors in one ValidationError, which callers catching ValueError still catch."""
    with pytest.raises(ValueError, match="tenant_id") as caught:
        Namespace(tenant_id="  ", project_id="x" * 201)
    assert isinstance(caught.value, ValidationError)
    assert [(e.field, e.code) for e in caught.value.errors] == [
        ("tenant_id", "empty"),
        ("project_id", "too_long"),
    ]


def test_a_part_that_is_not_a_string_is_a_type_error_field():
    """A number or None is a FieldError of code `type`, not a crash in normalisation."""
    with pytest.raises(ValidationError) as caught:
        Namespace(tenant_id=42)  # type: ignore[arg-type]
    assert [(e.field, e.code) for e in caught.value.errors] == [("tenant_id", "type")]


@given(st.text(min_size=1, max_size=60))
def test_a_namespace_part_is_stable_under_its_own_normalisation(text):
    """Whatever is accepted is already normal: rebuilding the namespace from its parts changes nothing."""
    try:
        ns = Namespace(tenant_id=text)
    except ValidationError:
        return
    assert Namespace(tenant_id=ns.tenant_id) == ns
    assert ns.tenant_id == ns.tenant_id.strip()
    assert unicodedata.is_normalized("NFKC", ns.tenant_id)
