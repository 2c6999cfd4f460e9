from __future__ import annotations

import json
from pathlib import Path

import attrs
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker import Namespace, SelectedBlock, SelectionResult, SourceOutcome, SourceStatus, Tally
from broker._trace import (
    INFERENCE_TRACE_SCHEMA_VERSION,
    BlockTrace,
    MemoryCounts,
    TurnFacts,
    TurnTrace,
    trace_schema,
    turn_completed,
)

ROOT = Path(__file__).resolve().parents[2]
NS = Namespace(tenant_id="acme", project_id="atlas")


def selection(selected: int = 1, candidates: int = 4, tally: Tally | None = None) -> SelectionResult:
    blocks = tuple(
        SelectedBlock(
            entry_id=f"m{i}",
            source="store",
            sources=("store",),
            block="memory",
            score=0.8,
            memory_type=None,
            text="secret memory text",
            created_at=None,
        )
        for i in range(selected)
    )
    return SelectionResult(
        blocks=blocks,
        candidates_evaluated=candidates,
        memories=tally,
        types_queried=("episodic",),
        qpp=0.89,
        sources=(
            SourceOutcome(name="store", status=SourceStatus.OK, latency_ms=1.23456, candidates=3),
            SourceOutcome(
                name="neurons", status=SourceStatus.FAILED, latency_ms=0.5, error="RuntimeError: boom"
            ),
        ),
    )


def facts(**kw: object) -> TurnFacts:
    fields: dict[str, object] = {
        "turn_id": "t-1",
        "task_id": "task-1",
        "namespace": NS,
        "total_ms": 12.3456,
        "selection_ms": 4.0,
        "selection": selection(tally=Tally(candidates=4, cleared=3)),
        "memory_unavailable_reason": None,
        "admitted": (
            BlockTrace(
                name="memory",
                kind="memory",
                tokens=20,
                entry_id="m0",
                score=0.8,
                band=0.9,
                source="store",
                text="mem",
            ),
            BlockTrace(
                name="memorules",
                kind="memory",
                tokens=9,
                entry_id="r1",
                score=0.7,
                source="memorules",
                rank=0,
            ),
            BlockTrace(name="user", kind="task", tokens=30, entry_id="task-1", text="the task"),
        ),
        "dropped": (
            BlockTrace(
                name="history", kind="history", tokens=99, entry_id="old", reason="input budget", text="old"
            ),
        ),
        "memory_budget": 1200,
        "input_budget": 8000,
        "task_over_budget": False,
        "floor": 0.42,
        "task_text": "the active task text",
    }
    fields.update(kw)
    return TurnFacts(**fields)  # type: ignore[arg-type]


def validate(event: dict) -> None:
    jsonschema.Draft202012Validator(trace_schema()).validate({"event": "turn.completed", **event})


def test_event_carries_every_v9_field_and_validates():
    """The event has the memory counts, the gate and bands, budgets, sources and blocks, and fits the schema."""
    event = turn_completed(facts())
    validate(event)
    assert event["schema_version"] == INFERENCE_TRACE_SCHEMA_VERSION == 9
    assert event["namespace"] == {"tenant": "acme", "project": "atlas"}
    assert event["timings"] == {"total_ms": 12.346, "selection_ms": 4.0, "queue_ms": 0.0}
    assert event["memory_candidates"] == 4
    assert event["memory_selected"] == 3
    assert event["memory_injected"] == 2
    assert event["memory_cut_by_budget"] == 1
    assert event["memory_abstained"] is False
    assert event["memory_types_queried"] == ["episodic"]
    assert event["irrelevant_memory_rate"] == 0.25
    assert event["blocks"][1]["rank"] == 0
    assert "rank" not in event["blocks"][0]
    assert event["sources"][0] == {"name": "store", "status": "ok", "latency_ms": 1.235, "candidates": 3}
    assert event["sources"][1]["error"] == "RuntimeError: boom"
    assert event["memorule_ids"] == ["r1"]
    assert event["dropped"] == [
        {"name": "history", "kind": "history", "tokens": 99, "entry_id": "old", "reason": "input budget"}
    ]
    assert event["memory_tokens"] == 29
    assert event["total_tokens"] == 59
    assert event["qpp"] == 0.89
    assert event["floor"] == 0.42
    assert event["blocks"][0]["band"] == 0.9
    assert event["query_has_message"] is False
    assert event["history_selected"] == 0


def test_a_hand_built_selection_counts_its_selected_blocks():
    """A selection without the selector's tally (a host's own selector) counts its blocks as cleared."""
    event = turn_completed(facts(selection=selection(selected=1, candidates=4), admitted=()))
    validate(event)
    assert (event["memory_candidates"], event["memory_selected"], event["memory_injected"]) == (4, 1, 0)
    assert event["memory_cut_by_budget"] == 1
    assert event["irrelevant_memory_rate"] == 0.75


@given(
    candidates=st.integers(0, 50),
    cleared=st.integers(0, 50),
    injected=st.integers(0, 50),
)
def test_counts_add_up(candidates, cleared, injected):
    """Whatever the counts, selected = injected + cut by budget when the budget cut, and the rate is in [0, 1]."""
    cleared = min(cleared, candidates)
    injected = min(injected, cleared)
    counts = MemoryCounts(candidates=candidates, selected=cleared, injected=injected)
    assert counts.selected == counts.injected + counts.cut_by_budget
    rate = counts.irrelevant_rate
    assert (rate is None) == (candidates == 0)
    assert rate is None or 0.0 <= rate <= 1.0


def test_the_wait_in_line_is_in_the_timings():
    """A selection that queued for a place reports how long, within v7 (an optional field)."""
    event = turn_completed(facts(selection=attrs.evolve(selection(), queued_ms=12.5)))
    validate(event)
    assert event["timings"]["queue_ms"] == 12.5
    assert "queue_ms" not in turn_completed(facts(selection=None))["timings"]


def test_no_text_leaves_unless_asked():
    """By default no memory or task text is in the event; include_text adds it."""
    quiet = json.dumps(turn_completed(facts()))
    for text in ("secret memory text", "the active task text", '"mem"', "the task", "old past work"):
        assert text not in quiet
    loud = turn_completed(facts(), include_text=True)
    validate(loud)
    assert loud["task_text"] == "the active task text"
    assert loud["blocks"][0]["text"] == "mem"


def test_unavailable_selector_event_validates():
    """An abstaining turn without a selection still yields a valid event with its reason."""
    event = turn_completed(
        facts(selection=None, selection_ms=None, memory_unavailable_reason="selector closed", admitted=())
    )
    validate(event)
    assert event["memory_abstained"] is True
    assert event["memory_candidates"] == 0
    assert event["sources"] == []
    assert event["memory_unavailable_reason"] == "selector closed"


def test_schema_rejects_a_wrong_version_and_accepts_unknown_keys():
    """Readers can rely on the version and types, and new keys never break them."""
    event = turn_completed(facts())
    validate({**event, "added_in_v9": {"anything": 1}})
    with pytest.raises(jsonschema.ValidationError):
        validate({**event, "schema_version": 7})
    with pytest.raises(jsonschema.ValidationError):
        validate({**event, "memory_abstained": "no"})
    broken = dict(event)
    del broken["turn_id"]
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)


def test_schema_is_valid_and_shipped_as_package_data():
    """The schema is a valid draft 2020-12 schema inside the package, and documented."""
    jsonschema.Draft202012Validator.check_schema(trace_schema())
    assert (ROOT / "broker" / "data" / "trace-v9.schema.json").is_file()
    assert not (ROOT / "broker" / "data" / "trace-v7.schema.json").exists()
    changelog = (ROOT / "docs" / "trace-schema.md").read_text(encoding="utf-8")
    assert "| v9 |" in changelog
    for field in ("memory_candidates", "memory_injected", "memory_cut_by_budget"):
        assert field in changelog


def test_a_turn_trace_reads_as_the_event_it_logs():
    """`Context.trace` is typed (its facts) and reads as exactly the `turn.completed` fields."""
    done = facts(history_unavailable_reason="history timeout")
    trace = TurnTrace(facts=done, include_text=True)
    assert dict(trace) == turn_completed(done, include_text=True)
    assert list(trace)[-1] == "history_unavailable_reason"
    assert trace["history_unavailable_reason"] == "history timeout"
    assert trace.facts is done
    validate(dict(trace))
