"""The record format, parsed in-process (pure): type order, content-derived ids, every problem."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from context_broker._cli._records import RECORDS, parse, parse_line

LINES = [
    {"record": "edge", "src": "a", "relation": "knows", "dst": "b"},
    {"record": "node", "name": "Ana", "id": "a"},
    {"record": "task", "description": "Plan the offsite", "status": "completed"},
    {"text": "a plain note"},
    {"record": "fact", "subject": "the cache", "predicate": "runs on", "object": "Redis"},
    {"record": "node", "name": "Bo", "id": "b"},
]


@given(st.permutations(LINES))
def test_records_come_out_in_write_order_whatever_the_file_order(lines):
    """Nodes always precede the edges joining them, notes are split out, line numbers kept."""
    parsed, problems = parse([(i + 1, json.dumps(o)) for i, o in enumerate(lines)])
    assert problems == []
    order = list(RECORDS)
    types = [r.type for r in parsed.records]
    assert types == sorted(types, key=order.index)
    assert [e.text for _, e in parsed.notes] == ["a plain note"]
    assert {lines[r.line - 1].get("record") for r in parsed.records} == set(types)


@given(st.permutations(["subject", "predicate", "object"]))
def test_a_derived_id_depends_on_content_not_key_order(keys):
    """The same fact written with its keys in any order gets the same id; other content another."""
    fact = {"subject": "the cache", "predicate": "runs on", "object": "Redis"}
    line = json.dumps({"record": "fact", **{k: fact[k] for k in keys}})
    record, _ = parse_line(1, line)
    other, _ = parse_line(1, json.dumps({"record": "fact", **fact, "object": "Valkey"}))
    assert record is not None
    assert other is not None
    assert record.derived_id
    assert record.fields["id"] == parse_line(1, json.dumps({"record": "fact", **fact}))[0].fields["id"]
    assert record.fields["id"] != other.fields["id"]


def test_a_given_id_is_kept_and_not_derived():
    """A record's own id is used as it is."""
    record, _ = parse_line(1, json.dumps({"record": "node", "name": "Ana", "id": "a"}))
    assert record is not None
    assert (record.fields["id"], record.derived_id) == ("a", False)


def test_every_problem_of_a_line_is_reported():
    """Unknown fields, missing required ones and wrong types come back together."""
    _, problems = parse_line(1, json.dumps({"record": "neuron", "triggers": "x", "colour": 1}))
    assert problems == [
        "colour: unknown field for a neuron record",
        "text: required for a neuron record",
        "triggers: must be a list of strings",
    ]
    assert parse_line(1, "[1]")[1] == ["must be a JSON object"]
    assert parse_line(1, json.dumps({"record": "blob"}))[1][0].startswith("record: must be one of note, fact")
    assert parse_line(1, json.dumps({"text": "x", "kind": "memorule"}))[1] == [
        'kind: a memorule is a {"record": "memorule", ...} line'
    ]
