"""Tests of memorule writes: create, update and delete, each with its audit event, atomically."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import structlog
from memorule_kit import (
    NS,
    QUERY,
    SESSION,
    TOPIC,
    count,
    damage_state,
    field_codes,
    fill,
    fts_consistent,
    recall_ids,
    write_rule,
)
from store_kit import StoreOpener, sql_rows

from broker import (
    Namespace,
    SessionContext,
    ValidationError,
)
from sources import (
    AuditEvent,
    MemoryStore,
    NeuronWriter,
    WriterSession,
    audit_events,
    delete_memorule,
    memorule_history,
    semantic_recall,
    update_memorule,
)


def test_a_failing_audit_insert_rolls_back_the_write(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row, state and event share one transaction: if the event fails, nothing stays."""
    import sources._memorules._writes as mod  # noqa: PLC0415

    def boom(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(mod, "_append_audit", boom)
    before = count(store, "SELECT count(*) FROM entries")
    with pytest.raises(Exception, match="disk I/O error"):
        write_rule(store)
    assert count(store, "SELECT count(*) FROM entries") == before
    assert count(store, "SELECT count(*) FROM memorule_states") == 0
    assert semantic_recall(store, QUERY, namespace=NS) == []


def test_update_appends_a_state_and_reindexes_the_text(store: MemoryStore) -> None:
    """An update appends a state (history keeps the old one) and recall sees the new text."""
    rid = write_rule(store, confidence="asserted")
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
    assert fts_consistent(store)


def test_update_validates_everything_and_appends_nothing_when_invalid(store: MemoryStore) -> None:
    """Invalid updates report every field at once; the state count does not change."""
    rid = write_rule(store)
    with pytest.raises(ValidationError) as exc:
        update_memorule(
            store, rid, namespace=NS, session=SESSION, subject="ab", confidence="meh", applies_to={"x": "y"}
        )
    assert field_codes(exc) == {
        ("subject", "too_short"),
        ("confidence", "invalid_choice"),
        ("applies_to", "unknown_key"),
        ("applies_to", "empty"),
    }
    with pytest.raises(ValidationError) as exc:
        update_memorule(store, rid, namespace=NS, session=SESSION)
    assert field_codes(exc) == {("update", "empty")}
    with pytest.raises(ValidationError) as exc:
        update_memorule(store, "nope", namespace=NS, session=SESSION, confidence="observed")
    assert field_codes(exc) == {("id", "not_found")}
    assert len(memorule_history(store, rid, namespace=NS)) == 1
    assert len(audit_events(store)) == 1


def test_delete_removes_the_rule_and_keeps_its_audit_trail(store: MemoryStore) -> None:
    """A delete removes row, states and index entry; its events (create, delete) stay."""
    rid = write_rule(store, evidence_signal_id="sig-1")
    assert delete_memorule(store, rid, namespace=NS, session=SESSION, evidence_signal_id="sig-2") is True
    assert store.get(rid, namespace=NS) is None
    assert memorule_history(store, rid, namespace=NS) == []
    assert semantic_recall(store, QUERY, namespace=NS, source_type="memory") == []
    assert count(store, "SELECT count(*) FROM memorule_states") == 0
    assert [(e.action, e.evidence_signal_id) for e in audit_events(store)] == [
        ("create", "sig-1"),
        ("delete", "sig-2"),
    ]
    assert delete_memorule(store, rid, namespace=NS, session=SESSION) is False
    assert len(audit_events(store)) == 2
    assert fts_consistent(store)


def test_memorules_are_addressed_in_their_own_project(store: MemoryStore) -> None:
    """Update, delete and history of another project's id find nothing."""
    rid = write_rule(store, applies_to={"scope": "global"})
    other = Namespace(tenant_id="acme", project_id="api")
    assert memorule_history(store, rid, namespace=other) == []
    assert delete_memorule(store, rid, namespace=other, session=SESSION) is False
    with pytest.raises(ValidationError):
        update_memorule(store, rid, namespace=other, session=SESSION, confidence="observed")


def test_audit_event_shape_and_log_event(store: MemoryStore) -> None:
    """Each write's event has the documented fields and is also logged as `memorule.audit`."""
    with structlog.testing.capture_logs() as logs:
        rid = write_rule(store, evidence_signal_id="sig-7")
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
        write_rule(store, session=None)
    assert field_codes(exc) == {("session_id", "required"), ("persona", "required")}
    assert audit_events(store) == []
    rid = write_rule(store)
    with pytest.raises(ValidationError) as exc:
        update_memorule(store, rid, namespace=NS, body="A body long enough to pass.")
    assert field_codes(exc) == {("session_id", "required"), ("persona", "required")}
    with pytest.raises(ValidationError) as exc:
        delete_memorule(store, rid, namespace=NS)
    assert field_codes(exc) == {("session_id", "required"), ("persona", "required")}
    assert [e.action for e in audit_events(store)] == ["create"]
    assert all(e.written_by_session_id and e.written_by_persona for e in audit_events(store))


def _vectors_of(store: MemoryStore, rowid: int) -> list[bytes]:
    """The stored vectors of an entry, as bytes on either engine (a blob, or a pgvector `Vector`)."""
    rows = sql_rows(store, "SELECT vec FROM vectors WHERE src_rowid = ? AND corpus = 0", (rowid,))
    return [
        v if isinstance(v, bytes) else np.asarray(v.to_numpy(), dtype=np.float32).tobytes() for (v,) in rows
    ]


def test_hybrid_store_keeps_one_current_vector_per_memorule(make_store: StoreOpener) -> None:
    """With an embedder, a memorule's vector is written with it and replaced on a text update."""
    with make_store(mode="hybrid") as store:
        fill(store, NS, 10)
        rid = write_rule(store)
        ((rowid,),) = sql_rows(store, "SELECT rowid FROM entries WHERE id = ?", (rid,))
        before = _vectors_of(store, rowid)
        assert len(before) == 1
        update_memorule(
            store,
            rid,
            namespace=NS,
            session=SESSION,
            body="Database migrations ship with a tested rollback script.",
        )
        after = _vectors_of(store, rowid)
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


def test_the_store_refuses_memorule_writes_and_deletes_that_would_skip_the_audit(store: MemoryStore) -> None:
    """Only the memorule API writes or deletes a memorule: the generic store paths refuse, so no
    rule exists without its state and no change happens without its audit event."""
    rid = write_rule(store)
    with pytest.raises(ValidationError) as err:
        store.delete(rid, namespace=NS)
    assert field_codes(err) == {("id", "is_memorule")}
    with pytest.raises(ValidationError) as err:
        store.add_entry("a replacement text", namespace=NS, id=rid, replace=True)
    assert field_codes(err) == {("id", "is_memorule")}
    with pytest.raises(ValidationError) as err:
        NeuronWriter(store).add_neuron("a neuron", namespace=NS, triggers=["rollback"], id=rid, replace=True)
    assert field_codes(err) == {("id", "is_memorule")}
    with pytest.raises(ValidationError) as err:
        store.add_entry("a rule without state", namespace=NS, kind="memorule")
    assert field_codes(err) == {("kind", "use_remember")}
    assert [e.action for e in audit_events(store)] == ["create"]
    assert recall_ids(store, SessionContext(), NS) == [rid]


def test_update_of_a_damaged_rule_asks_for_applies_to_then_repairs_it(store: MemoryStore) -> None:
    """Without applies_to the update cannot merge: a field error says what to give; with it, it repairs."""
    rid = write_rule(store)
    damage_state(store, rid, 1)
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
    rid = write_rule(store)
    damage_state(store, rid, 1)
    assert delete_memorule(store, rid, namespace=NS, session=SESSION) is True
    assert memorule_history(store, rid, namespace=NS) == []


def test_an_update_of_a_field_a_memorule_does_not_have_is_refused(store: MemoryStore) -> None:
    """A misspelt field is a TypeError and appends no state, rather than an update that changes nothing."""
    rid = write_rule(store)
    with pytest.raises(TypeError, match="colour"):
        update_memorule(store, rid, namespace=NS, session=SESSION, colour="red")  # type: ignore[call-arg]
    assert len(memorule_history(store, rid, namespace=NS)) == 1
