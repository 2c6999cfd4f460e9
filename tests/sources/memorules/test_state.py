"""Tests of reading what writes recorded: history and audit events."""

from __future__ import annotations

import pytest
import structlog
from memorule_kit import (
    NS,
    SESSION,
    damage_state,
    field_codes,
    fill,
    write_rule,
)

from broker import (
    Namespace,
    ValidationError,
)
from sources import (
    MemoryStore,
    audit_events,
    memorule_history,
    update_memorule,
)


def test_audit_filters_by_time_and_tenant(store: MemoryStore) -> None:
    """`since` is inclusive and `tenant` never shows another tenant's events."""
    first = write_rule(store)
    other = Namespace(tenant_id="globex", project_id="web")
    fill(store, other, 5)
    write_rule(store, other)
    events = audit_events(store)
    assert [e.tenant_id for e in events] == ["acme", "globex"]
    assert [e.memorule_id for e in audit_events(store, tenant="acme")] == [first]
    assert audit_events(store, since=events[1].written_at) == [events[1]]
    assert audit_events(store, since="2999-01-01T00:00:00+00:00") == []
    with pytest.raises(ValidationError) as exc:
        audit_events(store, since="yesterday")
    assert field_codes(exc) == {("since", "invalid_timestamp")}


@pytest.mark.parametrize("damage", ["{oops", "[1, 2]"], ids=["not-json", "not-an-object"])
def test_history_skips_a_damaged_state_and_keeps_version_numbers(store: MemoryStore, damage: str) -> None:
    """One bad state must not hide the others, nor renumber them."""
    rid = write_rule(store)
    update_memorule(
        store, rid, namespace=NS, session=SESSION, body="Deploy through staging, then production, always."
    )
    update_memorule(store, rid, namespace=NS, session=SESSION, subject="Staging always first")
    damage_state(store, rid, 2, damage)
    with structlog.testing.capture_logs() as logs:
        states = memorule_history(store, rid, namespace=NS)
    assert [s.version for s in states] == [1, 3]
    assert any(e["event"] == "store.row_damaged" and e["id"] == f"{rid} v2" for e in logs)
