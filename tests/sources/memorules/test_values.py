"""Tests of the memorule values."""

from __future__ import annotations

import json

import attrs

from broker import Namespace
from sources import WriterSession
from sources._memorules import CONFIDENCE_WEIGHTS, MemoruleFields, MemoruleState
from sources._memorules._values import Stamp


def test_confidence_weights_are_ordered() -> None:
    """Weights order the levels observed > inferred > asserted, as documented."""
    assert (
        CONFIDENCE_WEIGHTS["observed"] > CONFIDENCE_WEIGHTS["inferred"] > CONFIDENCE_WEIGHTS["asserted"] > 0
    )


def _fields() -> MemoruleFields:
    return MemoruleFields(
        memorule_kind="feedback",
        subject="Staging first",
        body="Deploy through staging.",
        applies_to={"scope": "org"},
        confidence="observed",
        evidence_signal_id=None,
    )


def test_a_state_as_dict_is_json_ready_with_its_identity_first() -> None:
    """`history --json` prints it: id, namespace and version lead, the namespace as text."""
    stamp = Stamp(session=WriterSession(session_id="s-1", persona="donna"), at="2026-01-01T00:00:00+00:00")
    state = MemoruleState.of("r1", Namespace(tenant_id="acme", project_id="web"), _fields(), stamp, version=2)
    out = state.as_dict()
    assert list(out)[:4] == ["memorule_id", "namespace", "version", "memorule_kind"]
    assert (out["namespace"], out["written_by_persona"], out["written_at"]) == ("acme/web", "donna", stamp.at)
    assert json.loads(json.dumps(out)) == out


def test_changed_fields_replace_only_those_given() -> None:
    """An update's merge: the given fields change, the others stay as they were."""
    changed = _fields().changed({"body": "Deploy through staging, always."})
    assert changed.body == "Deploy through staging, always."
    assert attrs.evolve(changed, body=_fields().body) == _fields()
