"""Tests of memorules: validated writes, versioned state, audit events, context-ranked recall."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import structlog

from broker import (
    RECALL_MIN_SCORE,
    BrokerClosedError,
    ConfigError,
    Namespace,
    SessionContext,
    ValidationError,
)
from broker.abc import Source, SourceRequest
from sources import (
    CONFIDENCE_LEVELS,
    MEMORULE_KINDS,
    AuditEvent,
    MemorulesSource,
    MemoryStore,
    WriterSession,
    audit_events,
    delete_memorule,
    memorule_history,
    remember,
    semantic_recall,
    update_memorule,
)
from sources._memorules import CONFIDENCE_WEIGHTS, context_overlap
from sources._source_base import StoreReader

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    import numpy.typing as npt

NS = Namespace(tenant_id="acme", project_id="web")
SESSION = WriterSession(session_id="sess-1", persona="donna")
TOPIC = "Deploy releases through the staging checklist before production rollout."
QUERY = "deploy release staging checklist production rollout"
_FILLER_TEXT = (
    "lunch sandwich tomato soup report friday alice blue theme editor office plant water bob "
    "lisbon conference printer floor jammed cake parking garage carol pixel sync thursday "
    "morning weather river mountain bicycle guitar novel garden kitchen piano train ticket"
)
_FILLER_WORDS = tuple(_FILLER_TEXT.split())


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    """Open a lexical store (no model) with unrelated notes, so term statistics are realistic."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as s:
        _fill(s, NS)
        yield s


def _fill(store: MemoryStore, ns: Namespace, n: int = 60) -> None:
    words = _FILLER_WORDS
    for i in range(n):
        text = " ".join(words[(i * 7 + j * 5) % len(words)] for j in range(6))
        store.add_entry(text, namespace=ns)


def _rule(store: MemoryStore, ns: Namespace = NS, **kw: Any) -> str:
    args: dict[str, Any] = {
        "memorule_kind": "behavioral_rule",
        "subject": "Staging first",
        "body": TOPIC,
        "applies_to": {"scope": "project"},
        "session": SESSION,
    }
    args.update(kw)
    return remember(store, kind="memorule", namespace=ns, **args)


def _count(store: MemoryStore, sql: str) -> int:
    with store.db.read() as conn:
        return int(conn.execute(sql).fetchone()[0])


def _fields(exc: pytest.ExceptionInfo[ValidationError]) -> set[tuple[str, str]]:
    return {(e.field, e.code) for e in exc.value.errors}


# -- writes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("confidence", CONFIDENCE_LEVELS)
@pytest.mark.parametrize("memorule_kind", MEMORULE_KINDS)
def test_every_kind_and_confidence_is_written_and_recalled(
    store: MemoryStore, memorule_kind: str, confidence: str
) -> None:
    """Each of the 5 kinds x 3 confidence levels is stored, recalled with its fields, audited."""
    rid = _rule(store, memorule_kind=memorule_kind, confidence=confidence, evidence_signal_id="sig-9")
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
    rid = _rule(store)
    assert memorule_history(store, rid, namespace=NS)[-1].confidence == "inferred"


def test_missing_fields_are_all_reported_together_and_nothing_is_written(store: MemoryStore) -> None:
    """A bare memorule write names every required field at once and writes nothing."""
    before = _count(store, "SELECT count(*) FROM entries")
    with pytest.raises(ValidationError) as exc:
        remember(store, kind="memorule", namespace=NS)
    assert _fields(exc) == {
        ("memorule_kind", "required"),
        ("subject", "required"),
        ("body", "required"),
        ("applies_to", "required"),
        ("session_id", "required"),
        ("persona", "required"),
    }
    assert _count(store, "SELECT count(*) FROM entries") == before
    assert _count(store, "SELECT count(*) FROM memorule_states") == 0
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
    assert _fields(exc) == {
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
        _rule(store, **override)
    assert _fields(exc) == {expected}
    assert _count(store, "SELECT count(*) FROM entries WHERE kind = 'memorule'") == 0


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
    assert _count(store, "SELECT count(*) FROM memorule_states") == 0


def test_notes_refuse_memorule_fields_with_every_other_error(store: MemoryStore) -> None:
    """A note with memorule fields (and a bad type) reports all problems and writes nothing."""
    before = _count(store, "SELECT count(*) FROM entries")
    with pytest.raises(ValidationError) as exc:
        remember(store, namespace=NS, subject="Staging", confidence="observed", memory_type="dream")
    assert _fields(exc) == {
        ("subject", "not_allowed"),
        ("confidence", "not_allowed"),
        ("text", "required"),
        ("memory_type", "invalid_choice"),
    }
    assert _count(store, "SELECT count(*) FROM entries") == before


def test_existing_id_is_refused_without_state_or_event(store: MemoryStore) -> None:
    """A second write under the same id fails whole: no extra state, no extra event."""
    _rule(store, id="r1")
    with pytest.raises(ValidationError) as exc:
        _rule(store, id="r1")
    assert _fields(exc) == {("id", "exists")}
    assert _count(store, "SELECT count(*) FROM memorule_states") == 1
    assert len(audit_events(store)) == 1


def test_a_failing_audit_insert_rolls_back_the_write(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row, state and event share one transaction: if the event fails, nothing stays."""
    import sources._memorules._writes as mod  # noqa: PLC0415

    def boom(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(mod, "_append_audit", boom)
    before = _count(store, "SELECT count(*) FROM entries")
    with pytest.raises(Exception, match="disk I/O error"):
        _rule(store)
    assert _count(store, "SELECT count(*) FROM entries") == before
    assert _count(store, "SELECT count(*) FROM memorule_states") == 0
    assert semantic_recall(store, QUERY, namespace=NS) == []


# -- update, delete, history ----------------------------------------------------------------


def test_update_appends_a_state_and_reindexes_the_text(store: MemoryStore) -> None:
    """An update appends a state (history keeps the old one) and recall sees the new text."""
    rid = _rule(store, confidence="asserted")
    new_body = "Database migrations ship with a tested rollback script and a dry run."
    state = update_memorule(
        store, rid, namespace=NS, session=WriterSession(session_id="sess-2", persona="texi"), body=new_body
    )
    assert (state.version, state.body, state.confidence) == (2, new_body, "asserted")
    history = memorule_history(store, rid, namespace=NS)
    assert [(s.version, s.body, s.written_by_persona) for s in history] == [
        (1, TOPIC, "donna"),
        (2, new_body, "texi"),
    ]
    assert history[1] == state
    assert history[0].written_at < history[1].written_at
    ctx = SessionContext(scope="project")
    old = semantic_recall(store, QUERY, namespace=NS, source_type="memorule", context=ctx)
    assert all(TOPIC not in m.text and new_body in m.text for m in old)  # the old text is gone
    (match,) = semantic_recall(
        store, "tested rollback script database migrations", namespace=NS, source_type="memorule", context=ctx
    )
    assert match.id == rid
    assert [(e.action, e.written_by_session_id) for e in audit_events(store)] == [
        ("create", "sess-1"),
        ("update", "sess-2"),
    ]
    assert _fts_consistent(store)


def test_update_validates_everything_and_appends_nothing_when_invalid(store: MemoryStore) -> None:
    """Invalid updates report every field at once; the state count does not change."""
    rid = _rule(store)
    with pytest.raises(ValidationError) as exc:
        update_memorule(
            store, rid, namespace=NS, session=SESSION, subject="ab", confidence="meh", applies_to={"x": "y"}
        )
    assert _fields(exc) == {
        ("subject", "too_short"),
        ("confidence", "invalid_choice"),
        ("applies_to", "unknown_key"),
        ("applies_to", "empty"),
    }
    with pytest.raises(ValidationError) as exc:
        update_memorule(store, rid, namespace=NS, session=SESSION)
    assert _fields(exc) == {("update", "empty")}
    with pytest.raises(ValidationError) as exc:
        update_memorule(store, "nope", namespace=NS, session=SESSION, confidence="observed")
    assert _fields(exc) == {("id", "not_found")}
    assert len(memorule_history(store, rid, namespace=NS)) == 1
    assert len(audit_events(store)) == 1


def test_delete_removes_the_rule_and_keeps_its_audit_trail(store: MemoryStore) -> None:
    """A delete removes row, states and index entry; its events (create, delete) stay."""
    rid = _rule(store, evidence_signal_id="sig-1")
    assert delete_memorule(store, rid, namespace=NS, session=SESSION, evidence_signal_id="sig-2") is True
    assert store.get(rid, namespace=NS) is None
    assert memorule_history(store, rid, namespace=NS) == []
    assert semantic_recall(store, QUERY, namespace=NS, source_type="memory") == []
    assert _count(store, "SELECT count(*) FROM memorule_states") == 0
    assert [(e.action, e.evidence_signal_id) for e in audit_events(store)] == [
        ("create", "sig-1"),
        ("delete", "sig-2"),
    ]
    assert delete_memorule(store, rid, namespace=NS, session=SESSION) is False
    assert len(audit_events(store)) == 2
    assert _fts_consistent(store)


def test_memorules_are_addressed_in_their_own_project(store: MemoryStore) -> None:
    """Update, delete and history of another project's id find nothing."""
    rid = _rule(store, applies_to={"scope": "global"})
    other = Namespace(tenant_id="acme", project_id="api")
    assert memorule_history(store, rid, namespace=other) == []
    assert delete_memorule(store, rid, namespace=other, session=SESSION) is False
    with pytest.raises(ValidationError):
        update_memorule(store, rid, namespace=other, session=SESSION, confidence="observed")


# -- audit ----------------------------------------------------------------------------------


def test_audit_event_shape_and_log_event(store: MemoryStore) -> None:
    """Each write's event has the documented fields and is also logged as `memorule.audit`."""
    with structlog.testing.capture_logs() as logs:
        rid = _rule(store, evidence_signal_id="sig-7")
    (event,) = audit_events(store)
    assert isinstance(event, AuditEvent)
    assert event.as_dict() == {
        "memorule_id": rid,
        "action": "create",
        "written_by_session_id": "sess-1",
        "written_by_persona": "donna",
        "evidence_signal_id": "sig-7",
        "written_at": event.written_at,
        "tenant_id": "acme",
        "project_id": "web",
    }
    assert event.written_at == memorule_history(store, rid, namespace=NS)[0].written_at
    (logged,) = [e for e in logs if e["event"] == "memorule.audit"]
    assert {k: v for k, v in logged.items() if k not in {"event", "log_level"}} == event.as_dict()


def test_anonymous_writes_are_refused_with_typed_field_errors(store: MemoryStore) -> None:
    """Who wrote a rule is always recorded: a create, update or delete without a writer writes nothing."""
    with pytest.raises(ValidationError) as exc:
        _rule(store, session=None)
    assert _fields(exc) == {("session_id", "required"), ("persona", "required")}
    assert audit_events(store) == []
    rid = _rule(store)
    with pytest.raises(ValidationError) as exc:
        update_memorule(store, rid, namespace=NS, body="A body long enough to pass.")
    assert _fields(exc) == {("session_id", "required"), ("persona", "required")}
    with pytest.raises(ValidationError) as exc:
        delete_memorule(store, rid, namespace=NS)
    assert _fields(exc) == {("session_id", "required"), ("persona", "required")}
    assert [e.action for e in audit_events(store)] == ["create"]
    assert all(e.written_by_session_id and e.written_by_persona for e in audit_events(store))


def test_audit_filters_by_time_and_tenant(store: MemoryStore) -> None:
    """`since` is inclusive and `tenant` never shows another tenant's events."""
    first = _rule(store)
    other = Namespace(tenant_id="globex", project_id="web")
    _fill(store, other, 5)
    _rule(store, other)
    events = audit_events(store)
    assert [e.tenant_id for e in events] == ["acme", "globex"]
    assert [e.memorule_id for e in audit_events(store, tenant="acme")] == [first]
    assert audit_events(store, since=events[1].written_at) == [events[1]]
    assert audit_events(store, since="2999-01-01T00:00:00+00:00") == []
    with pytest.raises(ValidationError) as exc:
        audit_events(store, since="yesterday")
    assert _fields(exc) == {("since", "invalid_timestamp")}


# -- matching and ranking -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("applies_to", "context", "expected"),
    [
        ({"persona": "donna"}, SessionContext(persona="donna"), 1),
        ({"persona": "donna"}, SessionContext(persona="texi"), None),
        ({"persona": "donna"}, SessionContext(), 0),
        ({"persona": "donna", "surface": "cli"}, SessionContext(persona="donna"), 1),
        ({"surface": "cli"}, SessionContext(persona="donna"), 0),
        ({"persona": "donna", "surface": "cli"}, SessionContext(persona="donna", surface="cli"), 2),
        ({"persona": "donna", "surface": "cli"}, SessionContext(persona="donna", surface="web"), None),
        ({"specialization": "sql"}, SessionContext(specialization="sql", persona="x"), 1),
        ({"scope": "global"}, SessionContext(), 0),
        ({"scope": "global"}, SessionContext(scope="project"), 1),
        ({"scope": "org"}, SessionContext(scope="persona"), 1),
        ({"scope": "project"}, SessionContext(scope="project"), 1),
        ({"scope": "project"}, SessionContext(scope="org"), None),
        ({"scope": "persona"}, SessionContext(scope="project"), None),
        ({"scope": "org"}, SessionContext(scope="global"), None),
        ({"scope": "persona", "persona": "donna"}, SessionContext(scope="persona", persona="donna"), 2),
    ],
)
def test_context_overlap(applies_to: dict[str, str], context: SessionContext, expected: int | None) -> None:
    """Only a key the session states can exclude a rule (scope by level: a rule covers its level and
    narrower ones); a key it leaves unset counts as no overlap."""
    assert context_overlap(applies_to, context) == expected


def test_confidence_weights_are_ordered() -> None:
    """Weights order the levels observed > inferred > asserted, as documented."""
    assert (
        CONFIDENCE_WEIGHTS["observed"] > CONFIDENCE_WEIGHTS["inferred"] > CONFIDENCE_WEIGHTS["asserted"] > 0
    )


def _recall_ids(store: MemoryStore, context: SessionContext, ns: Namespace = NS) -> list[str]:
    return [
        m.id for m in semantic_recall(store, QUERY, namespace=ns, source_type="memorule", context=context)
    ]


def test_ranking_by_overlap(store: MemoryStore) -> None:
    """With equal confidence, more matching applies_to keys rank first (regardless of age)."""
    three = _rule(store, id="three", applies_to={"persona": "donna", "surface": "cli", "scope": "project"})
    two = _rule(store, id="two", applies_to={"persona": "donna", "surface": "cli"})
    one = _rule(store, id="one", applies_to={"persona": "donna"})
    ctx = SessionContext(persona="donna", surface="cli", scope="project")
    assert _recall_ids(store, ctx) == [three, two, one]
    matches = semantic_recall(store, QUERY, namespace=NS, source_type="memorule", context=ctx)
    assert [(m.overlap, m.rank_weight) for m in matches] == [(3, 6), (2, 4), (1, 2)]


def test_ranking_by_confidence(store: MemoryStore) -> None:
    """With equal overlap, observed > inferred > asserted (regardless of age)."""
    observed = _rule(store, id="obs", confidence="observed")
    inferred = _rule(store, id="inf", confidence="inferred")
    asserted = _rule(store, id="ass", confidence="asserted")
    assert _recall_ids(store, SessionContext(scope="project")) == [observed, inferred, asserted]


def test_ranking_multiplies_overlap_by_confidence(store: MemoryStore) -> None:
    """Overlap x weight: 1 key observed (3) beats 2 keys asserted (2); 3 asserted ties 1 observed."""
    two_asserted = _rule(
        store, id="a2", confidence="asserted", applies_to={"persona": "donna", "scope": "project"}
    )
    one_observed = _rule(store, id="o1", confidence="observed", applies_to={"persona": "donna"})
    ctx = SessionContext(persona="donna", scope="project")
    assert _recall_ids(store, ctx) == [one_observed, two_asserted]


def test_ranking_ties_break_by_recency(store: MemoryStore) -> None:
    """Equal overlap x weight: the newer write wins, and an update makes a rule newer."""
    old = _rule(store, id="old")
    new = _rule(store, id="new")
    assert _recall_ids(store, SessionContext(scope="project")) == [new, old]
    update_memorule(store, old, namespace=NS, session=SESSION, evidence_signal_id="sig-3")
    assert _recall_ids(store, SessionContext(scope="project")) == [old, new]


def test_only_a_contradicting_rule_is_left_out(store: MemoryStore) -> None:
    """A rule for another persona or surface is excluded; one keyed on what the session leaves unset is kept."""
    _rule(store, id="texi", applies_to={"persona": "texi"})
    _rule(store, id="web", applies_to={"surface": "web"})
    mine = _rule(store, id="mine", applies_to={"persona": "donna"})
    sql = _rule(store, id="sql", applies_to={"specialization": "sql"})
    assert _recall_ids(store, SessionContext(persona="donna", surface="cli")) == [mine, sql]
    assert sorted(_recall_ids(store, SessionContext())) == sorted(["texi", "web", mine, sql])


def test_unstated_keys_rank_below_matches_whatever_their_confidence(store: MemoryStore) -> None:
    """A matched asserted rule outranks an observed rule whose key the session does not state."""
    unstated = _rule(store, id="unstated", confidence="observed", applies_to={"surface": "cli"})
    matched = _rule(store, id="matched", confidence="asserted", applies_to={"persona": "donna"})
    assert _recall_ids(store, SessionContext(persona="donna")) == [matched, unstated]


def test_an_empty_context_still_ranks_by_confidence(store: MemoryStore) -> None:
    """Without a session context, an older observed rule outranks a newer asserted one."""
    observed = _rule(store, id="observed", confidence="observed", applies_to={"scope": "global"})
    asserted = _rule(store, id="asserted", confidence="asserted", applies_to={"scope": "global"})
    assert _recall_ids(store, SessionContext()) == [observed, asserted]
    matches = semantic_recall(store, QUERY, namespace=NS, source_type="memorule")
    assert [m.id for m in matches] == [observed, asserted]
    assert {m.source_type for m in matches} == {"memorule"}


def test_irrelevant_rules_stay_under_the_floor(store: MemoryStore) -> None:
    """A rule that applies to the context but not to the query is not recalled."""
    _rule(store)
    ctx = SessionContext(scope="project")
    assert (
        semantic_recall(store, "carol pixel guitar", namespace=NS, source_type="memorule", context=ctx) == []
    )
    assert semantic_recall(store, "the and of", namespace=NS, source_type="memorule", context=ctx) == []


def test_memorule_score_is_the_store_score(store: MemoryStore) -> None:
    """A memorule's score is the calibrated score the store gives the same entry."""
    rid = _rule(store)
    (match,) = semantic_recall(
        store, QUERY, namespace=NS, source_type="memorule", context=SessionContext(scope="project")
    )
    (recalled,) = [r for r in store.recall(QUERY, namespace=NS) if r.memory.id == rid]
    assert match.score == pytest.approx(recalled.score)


def test_memory_source_type_returns_all_memory(store: MemoryStore) -> None:
    """source_type='memory' mixes notes and memorules (whatever their applies_to)."""
    note = store.add_entry("Staging checklist for the production deploy release rollout", namespace=NS)
    rule = _rule(store, applies_to={"persona": "texi"})
    matches = semantic_recall(store, QUERY, namespace=NS, source_type="memory")
    by_id = {m.id: m for m in matches}
    assert set(by_id) == {note, rule}
    assert (by_id[rule].kind, by_id[rule].memorule_kind, by_id[rule].applies_to) == (
        "memorule",
        "behavioral_rule",
        {"persona": "texi"},
    )
    assert (by_id[note].kind, by_id[note].memorule_kind) == ("note", None)
    assert (by_id[note].source_type, by_id[rule].source_type) == ("memory", "memorule")
    assert by_id[note].as_dict()["source_type"] == "memory"
    assert [m.score for m in matches] == sorted((m.score for m in matches), reverse=True)


def test_typed_recall_keeps_the_asked_types(store: MemoryStore) -> None:
    """`types` narrows both source types as a turn's typed request does (unclassified memories stay)."""
    plain = _rule(store, id="plain")
    _rule(store, id="epi", memory_type="episodic")
    note = store.add_entry(
        "Staging checklist for the production deploy release rollout", namespace=NS, memory_type="procedural"
    )
    rules = semantic_recall(store, QUERY, namespace=NS, source_type="memorule", types=["procedural"])
    assert [m.id for m in rules] == [plain]
    memory = semantic_recall(store, QUERY, namespace=NS, source_type="memory", types=["procedural"])
    assert {m.id for m in memory} == {note, plain}
    with pytest.raises(ValidationError) as exc:
        semantic_recall(store, QUERY, namespace=NS, types=["dream"])
    assert _fields(exc) == {("types", "invalid_choice")}


def test_recall_arguments_are_validated_together(store: MemoryStore) -> None:
    """Bad query, source_type, top_k and context are all reported at once."""
    with pytest.raises(ValidationError) as exc:
        semantic_recall(
            store,
            "",
            namespace=NS,
            source_type="rules",
            top_k=0,
            context=SessionContext(scope="team"),
            mode="fuzzy",
        )
    assert _fields(exc) == {
        ("mode", "invalid_choice"),
        ("query", "empty"),
        ("source_type", "invalid_choice"),
        ("top_k", "out_of_range"),
        ("context", "invalid_choice"),
    }


def test_dense_modes_need_an_embedder(store: MemoryStore) -> None:
    """A dense recall of memorules on a store without a model is a ConfigError, as in the store."""
    _rule(store)
    with pytest.raises(ConfigError):
        semantic_recall(store, QUERY, namespace=NS, source_type="memorule", mode="hybrid")


# -- visibility -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "visible"),
    [("global", True), ("org", True), ("project", False), ("persona", False), (None, False)],
)
def test_visibility_across_projects(store: MemoryStore, scope: str | None, visible: bool) -> None:
    """Global and org rules apply to every project of the tenant; others only to their own."""
    api = Namespace(tenant_id="acme", project_id="api")
    _fill(store, api, 20)
    applies: dict[str, str] = {"persona": "donna"} if scope is None else {"scope": scope, "persona": "donna"}
    rid = _rule(store, api, applies_to=applies)
    ctx = SessionContext(persona="donna")
    assert _recall_ids(store, ctx, api) == [rid]
    assert _recall_ids(store, ctx, NS) == ([rid] if visible else [])
    in_memory = [m.id for m in semantic_recall(store, QUERY, namespace=NS, source_type="memory")]
    assert in_memory == ([rid] if visible else [])


def test_a_project_without_memories_still_sees_tenant_wide_rules(store: MemoryStore) -> None:
    """A brand-new project of the tenant gets the tenant's global rules (scored at home)."""
    rid = _rule(store, applies_to={"scope": "global"})
    fresh = Namespace(tenant_id="acme", project_id="brand-new")
    assert _recall_ids(store, SessionContext(), fresh) == [rid]


def test_memorules_never_cross_tenants(store: MemoryStore) -> None:
    """Another tenant's global rules are invisible, in both source types."""
    globex = Namespace(tenant_id="globex", project_id="web")
    _fill(store, globex, 20)
    theirs = _rule(store, globex, applies_to={"scope": "global"})
    assert _recall_ids(store, SessionContext(), NS) == []
    assert semantic_recall(store, QUERY, namespace=NS, source_type="memory") == []
    assert _recall_ids(store, SessionContext(), globex) == [theirs]


def test_an_updated_scope_changes_visibility(store: MemoryStore) -> None:
    """Visibility follows the current state: narrowing global to project hides it elsewhere."""
    api = Namespace(tenant_id="acme", project_id="api")
    _fill(store, api)
    rid = _rule(store, api, applies_to={"scope": "global"})
    assert _recall_ids(store, SessionContext(), NS) == [rid]
    update_memorule(store, rid, namespace=api, session=SESSION, applies_to={"scope": "project"})
    assert _recall_ids(store, SessionContext(), NS) == []


# -- the source -----------------------------------------------------------------------------


async def test_source_surfaces_ranked_rules_in_the_memorules_block(store: MemoryStore) -> None:
    """The source returns non-contradicting rules above the floor, ranked (Candidate.rank), with their fields."""
    low = _rule(store, id="low", confidence="asserted", evidence_signal_id="sig-1")
    high = _rule(store, id="high", confidence="observed", applies_to={"persona": "donna", "scope": "project"})
    _rule(store, id="other", applies_to={"persona": "texi"})
    source = MemorulesSource(StoreReader(store=store))
    assert isinstance(source, Source)
    assert source.name == "memorules"
    await source.open()
    ctx = SessionContext(persona="donna", scope="project")
    got = await source.fetch(SourceRequest(task=QUERY, namespace=NS, context=ctx))
    assert [c.entry_id for c in got] == [high, low]
    assert all(c.block == "memorules" and c.source == "memorules" for c in got)
    assert all(c.score >= RECALL_MIN_SCORE for c in got)
    assert [c.metadata["memorule_rank"] for c in got] == [c.rank for c in got] == [0, 1]
    assert got[1].metadata["evidence_signal_id"] == "sig-1"
    assert got[0].metadata["applies_to"] == {"persona": "donna", "scope": "project"}
    assert (got[0].metadata["confidence"], got[0].metadata["memorule_kind"]) == (
        "observed",
        "behavioral_rule",
    )
    assert await source.fetch(SourceRequest(task="carol pixel guitar", namespace=NS, context=ctx)) == []
    no_ctx = await source.fetch(SourceRequest(task=QUERY, namespace=NS))
    assert [(c.entry_id, c.rank) for c in no_ctx] == [(high, 0), ("other", 1), (low, 2)]
    await source.aclose()
    with pytest.raises(BrokerClosedError):
        await source.fetch(SourceRequest(task=QUERY, namespace=NS, context=ctx))


async def test_source_honours_typed_requests(store: MemoryStore) -> None:
    """Typed requests keep unclassified rules and rules of the asked types only."""
    plain = _rule(store, id="plain")
    proc = _rule(store, id="proc", memory_type="procedural")
    _rule(store, id="epi", memory_type="episodic")
    source = MemorulesSource(StoreReader(store=store))
    await source.open()
    got = await source.fetch(
        SourceRequest(task=QUERY, namespace=NS, types=("procedural",), context=SessionContext())
    )
    assert sorted(c.entry_id for c in got) == sorted([plain, proc])
    await source.aclose()


# -- dense vectors --------------------------------------------------------------------------


def test_hybrid_store_keeps_one_current_vector_per_memorule(tmp_path: Path) -> None:
    """With an embedder, a memorule's vector is written with it and replaced on a text update."""
    with MemoryStore.open(tmp_path / "h.db") as store:
        _fill(store, NS, 10)
        rid = _rule(store)
        with store.db.read() as conn:
            (rowid,) = conn.execute("SELECT rowid FROM entries WHERE id = ?", (rid,)).fetchone()
            before = conn.execute(
                "SELECT vec FROM vectors WHERE src_rowid = ? AND corpus = 0", (rowid,)
            ).fetchall()
        assert len(before) == 1
        update_memorule(
            store,
            rid,
            namespace=NS,
            session=SESSION,
            body="Database migrations ship with a tested rollback script.",
        )
        with store.db.read() as conn:
            after = conn.execute(
                "SELECT vec FROM vectors WHERE src_rowid = ? AND corpus = 0", (rowid,)
            ).fetchall()
        assert len(after) == 1
        assert after != before
        ctx = SessionContext(scope="project")
        (match,) = semantic_recall(
            store,
            "tested rollback script database migrations",
            namespace=NS,
            source_type="memorule",
            context=ctx,
        )
        (recalled,) = [
            r
            for r in store.recall("tested rollback script database migrations", namespace=NS)
            if r.memory.id == rid
        ]
        assert match.score == pytest.approx(recalled.score, abs=1e-6)


def _fts_consistent(store: MemoryStore) -> bool:
    with store.db.write() as conn:
        for (ns_id,) in conn.execute("SELECT ns_id FROM namespaces").fetchall():
            table = f"fts_{int(ns_id)}"
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            fts_rows = conn.execute(f"SELECT count(*) FROM {table} WHERE (rowid & 3) = 0").fetchone()[0]
            entries = conn.execute("SELECT count(*) FROM entries WHERE ns_id = ?", (ns_id,)).fetchone()[0]
            if fts_rows != entries:
                return False
    return True


def test_the_store_refuses_memorule_writes_and_deletes_that_would_skip_the_audit(store: MemoryStore) -> None:
    """Only the memorule API writes or deletes a memorule: the generic store paths refuse, so no
    rule exists without its state and no change happens without its audit event."""
    rid = _rule(store)
    with pytest.raises(ValidationError) as err:
        store.delete(rid, namespace=NS)
    assert _fields(err) == {("id", "is_memorule")}
    with pytest.raises(ValidationError) as err:
        store.add_entry("a replacement text", namespace=NS, id=rid, replace=True)
    assert _fields(err) == {("id", "is_memorule")}
    with pytest.raises(ValidationError) as err:
        store.add_entry("a rule without state", namespace=NS, kind="memorule")
    assert _fields(err) == {("kind", "use_remember")}
    assert [e.action for e in audit_events(store)] == ["create"]
    assert _recall_ids(store, SessionContext(), NS) == [rid]


class QueryCountingEmbedder:
    """A fake model that counts how often it embeds one given query."""

    model_id = "fake-count"
    dim = 4

    def __init__(self, query: str) -> None:
        self.query = query
        self.query_calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors; count the calls that embed the query alone."""
        if list(texts) == [self.query]:
            self.query_calls += 1
        return np.full((len(texts), self.dim), 0.5, dtype=np.float32)


def test_query_is_embedded_once_across_visited_projects(tmp_path: Path) -> None:
    """Recall that probes several projects of a tenant embeds the query once, not once per project."""
    fake = QueryCountingEmbedder(QUERY)
    with MemoryStore.open(tmp_path / "e.db", mode="hybrid", embedder=fake) as store:
        for project in ("web", "api", "ops"):
            ns = Namespace(tenant_id="acme", project_id=project)
            _fill(store, ns, 10)
            _rule(store, ns, applies_to={"scope": "global"})
        semantic_recall(store, QUERY, namespace=NS, source_type="memorule", mode="hybrid")
    assert fake.query_calls == 1


def _damage_state(store: MemoryStore, rule_id: str, version: int, applies_to: str = "{oops") -> None:
    """Overwrite one stored state's applies_to with text that is not a JSON object."""
    with store.db.write() as conn:
        rowids = [
            r[0]
            for r in conn.execute(
                "SELECT s.rowid FROM memorule_states s JOIN entries e ON e.rowid = s.entry_rowid "
                "WHERE e.id = ? ORDER BY s.rowid",
                (rule_id,),
            )
        ]
        conn.execute(
            "UPDATE memorule_states SET applies_to = ? WHERE rowid = ?", (applies_to, rowids[version - 1])
        )


@pytest.mark.parametrize("damage", ["{oops", "[1, 2]"], ids=["not-json", "not-an-object"])
def test_history_skips_a_damaged_state_and_keeps_version_numbers(store: MemoryStore, damage: str) -> None:
    """One bad state must not hide the others, nor renumber them."""
    rid = _rule(store)
    update_memorule(
        store, rid, namespace=NS, session=SESSION, body="Deploy through staging, then production, always."
    )
    update_memorule(store, rid, namespace=NS, session=SESSION, subject="Staging always first")
    _damage_state(store, rid, 2, damage)
    with structlog.testing.capture_logs() as logs:
        states = memorule_history(store, rid, namespace=NS)
    assert [s.version for s in states] == [1, 3]
    assert any(e["event"] == "store.row_damaged" and e["id"] == f"{rid} v2" for e in logs)


def test_update_of_a_damaged_rule_asks_for_applies_to_then_repairs_it(store: MemoryStore) -> None:
    """Without applies_to the update cannot merge: a field error says what to give; with it, it repairs."""
    rid = _rule(store)
    _damage_state(store, rid, 1)
    with pytest.raises(ValidationError) as info:
        update_memorule(
            store, rid, namespace=NS, session=SESSION, body="Deploy through staging first, every single time."
        )
    assert [(e.field, e.code) for e in info.value.errors] == [("applies_to", "damaged")]
    state = update_memorule(
        store, rid, namespace=NS, session=SESSION, applies_to={"scope": "project", "persona": "donna"}
    )
    assert state.version == 2
    assert memorule_history(store, rid, namespace=NS)[-1].applies_to == {
        "scope": "project",
        "persona": "donna",
    }


def test_a_damaged_rule_can_be_deleted(store: MemoryStore) -> None:
    """Deleting needs none of the damaged fields: it is the other way out."""
    rid = _rule(store)
    _damage_state(store, rid, 1)
    assert delete_memorule(store, rid, namespace=NS, session=SESSION) is True
    assert memorule_history(store, rid, namespace=NS) == []


@pytest.mark.parametrize("source_type", ["memorule", "memory"])
def test_recall_skips_a_damaged_rule_and_serves_the_rest(store: MemoryStore, source_type: str) -> None:
    """A damaged rule is left out of recall; an intact one on the same topic is still found."""
    bad = _rule(store, subject="Staging first, broken")
    good = _rule(store)
    _damage_state(store, bad, 1)
    ctx = SessionContext(scope="project")
    hits = semantic_recall(store, QUERY, namespace=NS, source_type=source_type, context=ctx)
    assert good in [h.id for h in hits]
    assert bad not in [h.id for h in hits]
