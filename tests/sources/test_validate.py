"""Ids written to the store: no control or invisible character, so no text output can be forged."""

from __future__ import annotations

import pytest

from broker import MAX_TEXT_CHARS, Namespace, ValidationError
from sources import MAX_TEXT_CHARS as SOURCES_MAX_TEXT_CHARS
from sources import MemoryStore
from sources._validate import id_errors


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


def test_the_store_refuses_an_id_with_a_newline_and_writes_nothing(tmp_path):
    """The write fails as a ValidationError naming the field; the namespace stays empty."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        ns = Namespace(tenant_id="acme")
        with pytest.raises(ValidationError) as caught:
            store.add_entry("a note", namespace=ns, id="m1\nforged")
        assert [(e.field, e.code) for e in caught.value.errors] == [("id", "invisible")]
        assert store.stats(namespace=ns)["entries"] == 0


def test_the_text_limit_is_defined_once_in_broker():
    """The store re-exports the broker's limit: the store and the gather boundary agree."""
    assert SOURCES_MAX_TEXT_CHARS == MAX_TEXT_CHARS == 32_000
