"""Tests of neurons: the writer (triggers, stamping, deletes) and the `neurons` source."""

from __future__ import annotations

import pytest
from store_kit import indexed, sql_rows

from broker import RECALL_MIN_SCORE, Namespace, ValidationError
from broker.abc import SourceRequest
from sources import MemoryStore, NewNeuron
from sources._neurons import NeuronSource, NeuronWriter
from sources._store_reader import StoreReader

NS = Namespace(tenant_id="alice")
OTHER = Namespace(tenant_id="bob")
TASK = "when is the bakery quarterly tax return due"


@pytest.fixture
def store(filler_store: MemoryStore) -> MemoryStore:
    return filler_store


def source(store: MemoryStore) -> NeuronSource:
    return NeuronSource(StoreReader(store=store))


def test_writer_stamps_associative_and_records_triggers(store: MemoryStore) -> None:
    """A neuron is an entry of kind neuron, typed associative, with its trigger terms indexed."""
    nid = NeuronWriter(store).add_neuron(
        "Bakery tax returns are due quarterly; use the shared drive template.",
        namespace=NS,
        triggers=["quarterly tax return", "bakery"],
        id="n1",
    )
    memory = store.get(nid, namespace=NS)
    assert memory is not None
    assert (memory.kind, memory.memory_type) == ("neuron", "associative")
    terms = sorted(r[0] for r in sql_rows(store, "SELECT term FROM neuron_triggers"))
    assert terms == ["bakeri", "quarter", "return", "tax"]


async def test_trigger_match_is_scored_on_the_calibrated_scale(store: MemoryStore) -> None:
    """A neuron whose triggers the task mentions comes back above the floor, typed associative."""
    NeuronWriter(store).add_neuron(
        "Bakery tax returns are due quarterly; use the shared drive template.",
        namespace=NS,
        triggers=["quarterly tax return", "bakery"],
        id="n1",
    )
    [cand] = await source(store).fetch(SourceRequest(task=TASK, namespace=NS))
    assert cand.entry_id == "n1"
    assert cand.score >= RECALL_MIN_SCORE
    assert (cand.source, cand.block, cand.memory_type) == ("neurons", "memory", "associative")
    assert cand.metadata["matched_triggers"] == ["bakeri", "quarter", "return", "tax"]


async def test_importance_alone_never_injects(store: MemoryStore) -> None:
    """A top-importance neuron without a trigger in the task never fires; importance never scores."""
    writer = NeuronWriter(store)
    writer.add_neuron("Always greet Dana warmly.", namespace=NS, triggers=["Dana"], importance=1.0, id="vip")
    at_zero = NeuronSource(StoreReader(store=store), min_score=0.0)  # not even a below-floor candidate
    for task in (TASK, "what time is it", "tell me a joke"):
        assert await at_zero.fetch(SourceRequest(task=task, namespace=NS)) == []
    text = "Bakery tax returns are due quarterly."
    writer.add_neuron(text, namespace=NS, triggers=["bakery tax"], importance=1.0, id="hi")
    writer.add_neuron(text, namespace=NS, triggers=["bakery tax"], importance=0.0, id="lo")
    got = {c.entry_id: c.score for c in await source(store).fetch(SourceRequest(task=TASK, namespace=NS))}
    assert set(got) == {"hi", "lo"}
    assert got["hi"] == got["lo"]


@pytest.mark.parametrize("task", ["what time is it", "hi", "tell me a joke"])
async def test_trivial_task_gets_nothing_above_the_floor(store: MemoryStore, task: str) -> None:
    """A trivial task fires no neuron above the floor, even one triggered by a common word of it:
    "joke" (a memory holding every word of the task is a literal match, served as any other)."""
    NeuronWriter(store).add_neuron(
        "Sam's penguin joke is a standup favourite.", namespace=NS, triggers=["joke"]
    )
    got = await source(store).fetch(SourceRequest(task=task, namespace=NS))
    assert all(c.score < RECALL_MIN_SCORE for c in got)


def test_invalid_neuron_reports_every_field_and_writes_nothing(store: MemoryStore) -> None:
    """Bad text, triggers and importance are reported together; nothing is written."""
    writer = NeuronWriter(store)
    with pytest.raises(ValidationError) as info:
        writer.add_neuron("", namespace=NS, triggers=["ok trigger", "the of", ""], importance=2.0)
    assert {(e.field, e.code) for e in info.value.errors} == {
        ("text", "empty"),
        ("triggers[1]", "no_terms"),
        ("triggers[2]", "empty"),
        ("importance", "out_of_range"),
    }
    with pytest.raises(ValidationError, match="triggers"):
        writer.add_neuron("text", namespace=NS, triggers="bakery")
    with pytest.raises(ValidationError, match="triggers"):
        writer.add_neuron("text", namespace=NS, triggers=[])
    assert sql_rows(store, "SELECT count(*) FROM neuron_triggers") == [(0,)]
    assert sql_rows(store, "SELECT count(*) FROM entries WHERE kind = 'neuron'") == [(0,)]


def test_delete_and_replace_keep_the_indexes_consistent(store: MemoryStore) -> None:
    """Replacing or deleting a neuron leaves no stale trigger, index row or statistic behind."""
    query = "SELECT ns_id, n_docs, total_len FROM namespaces WHERE tenant_id = 'alice'"
    before = sql_rows(store, query)
    index_size = indexed(store, before[0][0])
    writer = NeuronWriter(store)
    writer.add_neuron("Bakery taxes.", namespace=NS, triggers=["bakery"], id="n")
    with pytest.raises(ValidationError, match="exists"):
        writer.add_neuron("Vendors.", namespace=NS, triggers=["vendors"], id="n")
    writer.add_neuron("Payroll dates.", namespace=NS, triggers=["payroll"], id="n", replace=True)
    assert sql_rows(store, "SELECT term FROM neuron_triggers") == [("payrol",)]
    assert writer.delete_neuron("f0", namespace=NS) is False  # not a neuron
    assert writer.delete_neuron("n", namespace=NS) is True
    assert sql_rows(store, query) == before
    assert indexed(store, before[0][0]) == index_size
    assert sql_rows(store, "SELECT count(*) FROM neuron_triggers") == [(0,)]


def test_a_batch_of_neurons_is_written_as_the_same_neurons_one_by_one(store: MemoryStore, tmp_path) -> None:
    """add_neurons stores, indexes and triggers each neuron exactly as add_neuron does."""
    neurons = [
        NewNeuron(text="Bakery taxes are due quarterly.", triggers=["quarterly tax", "bakery"], id="n1"),
        NewNeuron(text="Payroll runs on the 25th.", triggers=["payroll"], id="n2", importance=0.9),
    ]
    assert NeuronWriter(store).add_neurons(neurons, namespace=NS) == ["n1", "n2"]
    with MemoryStore.open(tmp_path / "single.db", mode=store.mode) as single:
        for n in neurons:
            NeuronWriter(single).add_neuron(
                n.text, namespace=NS, triggers=n.triggers, id=n.id, importance=n.importance
            )
        expected = [sql_rows(single, sql) for sql in _NEURON_STATE]
    assert [sql_rows(store, sql) for sql in _NEURON_STATE] == expected


_NEURON_STATE = (
    (
        "SELECT e.id, e.kind, e.memory_type, e.text, e.importance, t.term FROM neuron_triggers t "
        "JOIN entries e ON e.rowid = t.entry_rowid ORDER BY e.id, t.term"
    ),
    "SELECT count(*) FROM entries WHERE kind = 'neuron'",
)


def test_a_bad_neuron_in_a_batch_names_its_place_and_writes_nothing(store: MemoryStore) -> None:
    """Every error of a batch comes back at once, each field prefixed by its neuron's index."""
    writer = NeuronWriter(store)
    batch = [
        NewNeuron(text="Bakery taxes.", triggers=["bakery"], id="n"),
        NewNeuron(text="", triggers=["the of"], id="m", importance=2.0, created_at="nope", metadata=[1]),  # type: ignore[arg-type]
        NewNeuron(text="Payroll.", triggers=["payroll"], id="n"),
    ]
    with pytest.raises(ValidationError) as info:
        writer.add_neurons(batch, namespace=NS)
    assert {(e.field, e.code) for e in info.value.errors} == {
        ("[1].text", "empty"),
        ("[1].triggers[0]", "no_terms"),
        ("[1].importance", "out_of_range"),
        ("[1].created_at", "invalid_timestamp"),
        ("[1].metadata", "type"),
        ("[2].id", "duplicate"),
    }
    writer.add_neuron("Vendors.", namespace=NS, triggers=["vendors"], id="v")
    with pytest.raises(ValidationError, match="exists"):
        writer.add_neurons(
            [
                NewNeuron(text="Invoices.", triggers=["invoices"], id="x"),
                batch[0],
                NewNeuron(text="V.", triggers=["vendor"], id="v"),
            ],
            namespace=NS,
        )
    assert sql_rows(store, "SELECT e.id FROM entries e WHERE kind = 'neuron'") == [("v",)]
    assert writer.add_neurons([], namespace=NS) == []


async def test_namespace_isolation(store: MemoryStore) -> None:
    """A neuron of one namespace never fires for another's task."""
    NeuronWriter(store).add_neuron(
        "Bakery tax returns are due quarterly.", namespace=NS, triggers=["quarterly tax return"]
    )
    store.add_entry("Bob's notes.", namespace=OTHER)
    assert await source(store).fetch(SourceRequest(task=TASK, namespace=OTHER)) == []


async def test_typed_requests_filter_neurons(store: MemoryStore) -> None:
    """A typed request gets neurons only when it asks for associative memories."""
    NeuronWriter(store).add_neuron(
        "Bakery tax returns are due quarterly.", namespace=NS, triggers=["quarterly tax return", "bakery"]
    )
    src = source(store)
    assert await src.fetch(SourceRequest(task=TASK, namespace=NS, types=("episodic",))) == []
    assert await src.fetch(SourceRequest(task=TASK, namespace=NS, types=("associative",)))
