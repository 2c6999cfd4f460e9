"""Namespace parts are normalised and checked: one spelling of a name, one tenant."""

from __future__ import annotations

import math
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker import Block, Namespace, TurnRequest, ValidationError
from broker._model import context_order

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


# --- the turn's request and its blocks ------------------------------------------------------

NS = Namespace(tenant_id="acme")


def test_a_turn_request_names_every_bad_field_at_once():
    """One ValidationError lists the task, namespace, budget, mode and types problems together."""
    with pytest.raises(ValidationError) as caught:
        TurnRequest(task=" ", namespace="acme", deadline=1.0, mode="psychic", budget=0, types=["dreams"])  # type: ignore[arg-type]
    assert {e.field for e in caught.value.errors} == {"task", "namespace", "budget", "mode", "types"}


def test_a_turn_requests_deadline_is_a_time_on_the_clock():
    """The absolute deadline must be a number (NaN or a bool is refused); types become a tuple without repeats."""
    with pytest.raises(ValidationError, match="deadline"):
        TurnRequest(task="x", namespace=NS, deadline=math.nan)
    with pytest.raises(ValidationError, match="deadline"):
        TurnRequest(task="x", namespace=NS, deadline=True)
    request = TurnRequest(task="x", namespace=NS, deadline=12.5, types=["self", "self", "semantic"])  # type: ignore[arg-type]
    assert request.types == ("self", "semantic")


def block(name: str, entry_id: str, *, score: float | None = None, rank: int | None = None) -> Block:
    return Block(name=name, text=entry_id, tokens=1, entry_id=entry_id, score=score, rank=rank)


def test_a_blocks_kind_comes_from_the_block_table():
    """A block names its row of the table; its kind, priority and budget follow from it."""
    assert (block("memorules", "r").kind, block("history", "h").kind, block("user", "t").kind) == (
        "memory",
        "history",
        "task",
    )
    assert block("user", "t").evictable is False
    assert block("memory", "m").memory is True
    with pytest.raises(ValueError, match="name"):
        block("nonsense", "x")


def test_the_context_order_follows_the_table_and_a_sources_rank():
    """Persona memories, memorules in their rank (not score), memories, consolidated, history, the task last."""
    shuffled = [
        block("user", "t"),
        block("history", "h", score=0.9),
        block("memorules", "r2", score=0.99, rank=2),
        block("memory", "m", score=0.8),
        block("memorules", "r0", score=0.5, rank=0),
        block("consolidated", "c", score=0.95),
        block("persona_memories", "p", score=0.6),
        block("memorules", "r1", score=0.7, rank=1),
    ]
    assert [b.entry_id for b in context_order(shuffled)] == ["p", "r0", "r1", "r2", "m", "c", "h", "t"]
