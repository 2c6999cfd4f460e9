"""Tests of `remember`, the one write front: every field validated at once, then one write."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from memorule_kit import (
    NS,
    QUERY,
    SESSION,
    TOPIC,
    count,
    field_codes,
    open_store,
    write_rule,
)

from broker import (
    RECALL_MIN_SCORE,
    SessionContext,
    ValidationError,
)
from sources import (
    CONFIDENCE_LEVELS,
    KINDS,
    MEMORULE_KINDS,
    REMEMBER_KINDS,
    MemoryStore,
    WriterSession,
    audit_events,
    content_id,
    memorule_history,
    remember,
    remember_errors,
    semantic_recall,
)

if TYPE_CHECKING:
    from store_kit import StoreOpener


@pytest.fixture
def store(make_store: StoreOpener) -> MemoryStore:
    """A lexical store with unrelated notes in NS, so term statistics are realistic (on each engine)."""
    return open_store(make_store)


@pytest.mark.parametrize("confidence", CONFIDENCE_LEVELS)
@pytest.mark.parametrize("memorule_kind", MEMORULE_KINDS)
def test_every_kind_and_confidence_is_written_and_recalled(
    store: MemoryStore, memorule_kind: str, confidence: str
) -> None:
    """Each of the 5 kinds x 3 confidence levels is stored, recalled with its fields, audited."""
    rid = write_rule(store, memorule_kind=memorule_kind, confidence=confidence, evidence_signal_id="sig-9")
    (state,) = memorule_history(store, rid, namespace=NS)
    assert (state.memorule_kind, state.confidence, state.version) == (memorule_kind, confidence, 1)
    (match,) = semantic_recall(
        store, QUERY, namespace=NS, source_type="memorule", context=SessionContext(scope="project")
    )
    assert match.id == rid
    assert (match.memorule_kind, match.confidence, match.evidence_signal_id) == (
        memorule_kind,
        confidence,
        "sig-9",
    )
    assert match.applies_to == {"scope": "project"}
    assert match.score >= RECALL_MIN_SCORE
    assert [(e.memorule_id, e.action) for e in audit_events(store)] == [(rid, "create")]


def test_confidence_defaults_to_inferred(store: MemoryStore) -> None:
    """Omitting confidence stores `inferred`, the documented default."""
    rid = write_rule(store)
    assert memorule_history(store, rid, namespace=NS)[-1].confidence == "inferred"


def test_missing_fields_are_all_reported_together_and_nothing_is_written(store: MemoryStore) -> None:
    """A bare memorule write names every required field at once and writes nothing."""
    before = count(store, "SELECT count(*) FROM entries")
    with pytest.raises(ValidationError) as exc:
        remember(store, kind="memorule", namespace=NS)
    assert field_codes(exc) == {
        ("memorule_kind", "required"),
        ("subject", "required"),
        ("body", "required"),
        ("applies_to", "required"),
        ("session_id", "required"),
        ("persona", "required"),
    }
    assert count(store, "SELECT count(*) FROM entries") == before
    assert count(store, "SELECT count(*) FROM memorule_states") == 0
    assert audit_events(store) == []


def test_invalid_fields_are_all_reported_together(store: MemoryStore) -> None:
    """Every invalid field is reported in one ValidationError, each under its API name."""
    with pytest.raises(ValidationError) as exc:
        remember(
            store,
            kind="memorule",
            namespace=NS,
            memorule_kind="rule",
            subject="abc",
            body="too short",
            applies_to={"team": "x", "scope": "universe"},
            confidence="certain",
            evidence_signal_id="",
            session=WriterSession(session_id="", persona=""),
            memory_type="dream",
            id="",
            importance=2.0,
        )
    assert field_codes(exc) == {
        ("memorule_kind", "invalid_choice"),
        ("subject", "too_short"),
        ("body", "too_short"),
        ("applies_to", "unknown_key"),
        ("applies_to", "invalid_choice"),
        ("confidence", "invalid_choice"),
        ("evidence_signal_id", "invalid_id"),
        ("session_id", "invalid_value"),
        ("persona", "invalid_value"),
        ("memory_type", "invalid_choice"),
        ("id", "invalid_id"),
        ("importance", "out_of_range"),
    }
    assert audit_events(store) == []


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"memorule_kind": "rules"}, ("memorule_kind", "invalid_choice")),
        ({"memorule_kind": None}, ("memorule_kind", "required")),
        ({"subject": "abc"}, ("subject", "too_short")),
        ({"subject": "    x   "}, ("subject", "too_short")),
        ({"subject": None}, ("subject", "required")),
        ({"subject": 42}, ("subject", "type")),
        ({"body": "123456789"}, ("body", "too_short")),
        ({"body": "ten chars\x00!"}, ("body", "nul")),
        ({"body": None}, ("body", "required")),
        ({"body": "x" * 40_000}, ("body", "too_long")),
        ({"applies_to": None}, ("applies_to", "required")),
        ({"applies_to": {}}, ("applies_to", "empty")),
        ({"applies_to": ["scope"]}, ("applies_to", "type")),
        ({"applies_to": {"scope": "project", "team": "a"}}, ("applies_to", "unknown_key")),
        ({"applies_to": {"scope": "team"}}, ("applies_to", "invalid_choice")),
        ({"applies_to": {"persona": ""}}, ("applies_to", "invalid_value")),
        ({"applies_to": {"surface": 3}}, ("applies_to", "invalid_value")),
        ({"confidence": "sure"}, ("confidence", "invalid_choice")),
        ({"evidence_signal_id": "x" * 201}, ("evidence_signal_id", "invalid_id")),
        ({"session": ("s", "p")}, ("session", "type")),
        ({"created_at": "2024-01-01"}, ("created_at", "not_allowed")),
        ({"metadata": {"a": 1}}, ("metadata", "not_allowed")),
        ({"text": "a different body text"}, ("text", "conflict")),
    ],
)
def test_each_invalid_field_is_named(
    store: MemoryStore, override: dict[str, Any], expected: tuple[str, str]
) -> None:
    """Each invalid or missing field alone yields exactly its own error, and no write."""
    with pytest.raises(ValidationError) as exc:
        write_rule(store, **override)
    assert field_codes(exc) == {expected}
    assert count(store, "SELECT count(*) FROM entries WHERE kind = 'memorule'") == 0


def test_text_is_the_body(store: MemoryStore) -> None:
    """A positional text (the CLI's TEXT) is the memorule's body."""
    rid = remember(
        store,
        kind="memorule",
        namespace=NS,
        session=SESSION,
        text=TOPIC,
        memorule_kind="convention",
        subject="Staging first",
        applies_to={"scope": "org"},
    )
    assert memorule_history(store, rid, namespace=NS)[0].body == TOPIC
    memory = store.get(rid, namespace=NS)
    assert memory is not None
    assert memory.kind == "memorule"
    assert memory.text == f"Staging first\n{TOPIC}"
    assert memory.metadata["memorule_kind"] == "convention"


def test_notes_go_through_the_store_as_before(store: MemoryStore) -> None:
    """kind='note' writes a plain entry with no state and no audit event."""
    nid = remember(store, namespace=NS, text="a plain note about the garden", memory_type="episodic", id="n1")
    memory = store.get(nid, namespace=NS)
    assert memory is not None
    assert (memory.id, memory.kind, memory.memory_type) == ("n1", "note", "episodic")
    assert audit_events(store) == []
    assert count(store, "SELECT count(*) FROM memorule_states") == 0


def test_notes_refuse_memorule_fields_with_every_other_error(store: MemoryStore) -> None:
    """A note with memorule fields (and a bad type) reports all problems and writes nothing."""
    before = count(store, "SELECT count(*) FROM entries")
    with pytest.raises(ValidationError) as exc:
        remember(store, namespace=NS, subject="Staging", confidence="observed", memory_type="dream")
    assert field_codes(exc) == {
        ("subject", "not_allowed"),
        ("confidence", "not_allowed"),
        ("text", "required"),
        ("memory_type", "invalid_choice"),
    }
    assert count(store, "SELECT count(*) FROM entries") == before


def test_existing_id_is_refused_without_state_or_event(store: MemoryStore) -> None:
    """A second write under the same id fails whole: no extra state, no extra event."""
    write_rule(store, id="r1")
    with pytest.raises(ValidationError) as exc:
        write_rule(store, id="r1")
    assert field_codes(exc) == {("id", "exists")}
    assert count(store, "SELECT count(*) FROM memorule_states") == 1
    assert len(audit_events(store)) == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "memorule", "subject": "ab", "applies_to": {"scope": "team"}, "session": SESSION},
        {"kind": "memorule"},
        {"text": "a note", "subject": "Staging", "created_at": "yesterday", "importance": 3},
        {"kind": "dream", "text": ""},
    ],
    ids=["memorule", "bare-memorule", "note", "bad-kind"],
)
def test_remember_errors_are_exactly_what_remember_raises(store: MemoryStore, fields: dict[str, Any]) -> None:
    """The CLI, the MCP server and ingest report with `remember_errors`: it must match the write."""
    with pytest.raises(ValidationError) as exc:
        remember(store, namespace=NS, **fields)
    assert list(exc.value.errors) == remember_errors(**fields)


def test_remember_errors_refuses_a_field_remember_does_not_take() -> None:
    """A misspelt field is a TypeError, as it is for `remember`, not a silently valid write."""
    with pytest.raises(TypeError, match="colour"):
        remember_errors(kind="memorule", colour="red")


def test_every_memorule_error_comes_in_the_order_the_cli_prints_it() -> None:
    """Errors follow the fields' order: text, the memorule's fields, its writer, then the entry's."""
    errors = remember_errors(
        kind="memorule",
        text="a body given twice",
        body="another body",
        memorule_kind="rule",
        subject="ab",
        applies_to={"scope": "team"},
        confidence="sure",
        evidence_signal_id="",
        memory_type="dream",
        id="",
        importance=2,
        created_at="2024-01-01",
        metadata={},
    )
    assert [(e.field, e.code) for e in errors] == [
        ("text", "conflict"),
        ("memorule_kind", "invalid_choice"),
        ("subject", "too_short"),
        ("applies_to", "invalid_choice"),
        ("confidence", "invalid_choice"),
        ("evidence_signal_id", "invalid_id"),
        ("session_id", "required"),
        ("persona", "required"),
        ("memory_type", "invalid_choice"),
        ("id", "invalid_id"),
        ("importance", "out_of_range"),
        ("created_at", "not_allowed"),
        ("metadata", "not_allowed"),
    ]


def test_subject_and_body_together_are_checked_once_every_field_is_valid() -> None:
    """Each fits alone but not together: one `too_long` on body, unless another field is already wrong."""
    fields: dict[str, Any] = {
        "kind": "memorule",
        "memorule_kind": "feedback",
        "subject": "s" * 4_000,
        "body": "b" * 29_000,
        "applies_to": {"scope": "org"},
        "session": SESSION,
    }
    assert [(e.field, e.code) for e in remember_errors(**fields)] == [("body", "too_long")]
    fields["memorule_kind"] = "rule"
    assert [(e.field, e.code) for e in remember_errors(**fields)] == [("memorule_kind", "invalid_choice")]


def test_a_note_without_an_id_is_stored_once_as_add_entry_stores_it(store: MemoryStore) -> None:
    """A note through `remember` gets the store's text-derived id, so writing it again adds nothing."""
    first = remember(store, namespace=NS, text="the garden needs water on friday")
    assert first == content_id("the garden needs water on friday")
    assert remember(store, namespace=NS, text="the garden needs water on friday") == first
    assert count(store, f"SELECT count(*) FROM entries WHERE id = '{first}'") == 1


def test_a_neuron_is_refused_and_pointed_to_its_writer(store: MemoryStore) -> None:
    """`remember(kind="neuron")` is a ValidationError naming where neurons are written (one without
    trigger phrases was stored where no turn reads it), and nothing is written."""
    before = count(store, "SELECT count(*) FROM entries")
    with pytest.raises(ValidationError) as exc:
        remember(store, kind="neuron", text="The tile snapshot test is flaky under load.", namespace=NS)
    assert field_codes(exc) == {("kind", "not_allowed")}
    assert "add_neurons" in str(exc.value)
    assert count(store, "SELECT count(*) FROM entries") == before


def test_the_store_refuses_a_neuron_written_as_a_note(store: MemoryStore) -> None:
    """`add_entry(kind="neuron")`, the store's own primitive, refuses as `remember` does; the MCP
    tool's kinds and `remember`'s are every store kind but the neuron."""
    with pytest.raises(ValidationError) as exc:
        store.add_entry("The tile snapshot test is flaky under load.", namespace=NS, kind="neuron")
    assert field_codes(exc) == {("kind", "not_allowed")}
    assert set(KINDS) - set(REMEMBER_KINDS) == {"neuron"}
