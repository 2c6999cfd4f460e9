"""Tests of facts: the writer (validation, triples, deletes) and the `abstraction` source."""

from __future__ import annotations

import pytest
from store_kit import StoreOpener, indexed, sql_rows

from broker import Namespace, ValidationError
from broker.abc import SourceRequest
from broker.testing import background_memories
from sources import MemoryStore, NewEntry
from sources._abstraction import AbstractionSource, FactWriter, NewFact
from sources._store_reader import StoreReader
from sources._store_source import StoreSource
from sources.storage._engine import ReadStop

NS = Namespace(tenant_id="alice")
OTHER = Namespace(tenant_id="bob")
SHARED = "Caroline attended an LGBTQ support group meeting and found the transgender stories inspiring."
TASK = "What did Caroline find inspiring at the LGBTQ support group meeting?"


@pytest.fixture
def store(background_store: MemoryStore) -> MemoryStore:
    return background_store


def source(store: MemoryStore) -> AbstractionSource:
    return AbstractionSource(StoreReader(store=store))


def stats(store: MemoryStore, ns: Namespace) -> tuple[int, int, int]:
    """The namespace's document count, total length and text-index size."""
    ((ns_id, n_docs, total),) = sql_rows(
        store, "SELECT ns_id, n_docs, total_len FROM namespaces WHERE tenant_id = ?", (ns.tenant_id,)
    )
    return n_docs, total, indexed(store, ns_id)


async def test_equal_text_scores_equal_as_entry_and_fact(store: MemoryStore) -> None:
    """The same text written as an entry and as a fact gets the same score from both sources."""
    store.add_entry(SHARED, namespace=NS, id="e-shared")
    FactWriter(store).add_fact(SHARED, namespace=NS, id="shared")
    reader = StoreReader(store=store)
    from_store = await StoreSource(reader, store=store).fetch(SourceRequest(task=TASK, namespace=NS))
    from_facts = await AbstractionSource(reader).fetch(SourceRequest(task=TASK, namespace=NS))
    entry = next(c for c in from_store if c.entry_id == "e-shared")
    fact = next(c for c in from_facts if c.entry_id == "fact:shared")
    assert entry.score == fact.score
    assert fact.score >= 0.42
    assert (fact.source, fact.block, fact.memory_type) == ("abstraction", "memory", "semantic")


async def test_equal_text_scores_equal_in_hybrid_mode(make_store: StoreOpener) -> None:
    """Equal relevance means equal score in a dense mode too (stored vectors on both sides)."""
    with make_store(mode="hybrid") as store:
        store.add_entries([NewEntry(text=t) for t in background_memories()], namespace=NS)
        store.add_entry(SHARED, namespace=NS, id="e-shared")
        FactWriter(store).add_fact(SHARED, namespace=NS, id="shared")
        reader = StoreReader(store=store)
        request = SourceRequest(task=TASK, namespace=NS, mode="hybrid")
        from_store = await StoreSource(reader, store=store).fetch(request)
        from_facts = await AbstractionSource(reader).fetch(request)
    entry = next(c for c in from_store if c.entry_id == "e-shared")
    fact = next(c for c in from_facts if c.entry_id == "fact:shared")
    assert entry.score == pytest.approx(fact.score, abs=1e-6)


async def test_triple_is_rendered_and_found(store: MemoryStore) -> None:
    """A subject-predicate-object fact is stored as a sentence and keeps its parts."""
    writer = FactWriter(store)
    fid = writer.add_fact(
        namespace=NS, subject="Melanie", predicate="painted", object="a lake sunrise last year", id="spo"
    )
    assert fid == "spo"
    got = await source(store).fetch(
        SourceRequest(task="When did Melanie paint the lake sunrise?", namespace=NS)
    )
    [cand] = [c for c in got if c.entry_id == "fact:spo"]
    assert cand.text == "Melanie painted a lake sunrise last year."
    assert cand.metadata["subject"] == "Melanie"


def test_invalid_fact_reports_every_field_and_writes_nothing(store: MemoryStore) -> None:
    """A bad batch raises one ValidationError with all field errors and writes nothing."""
    before = stats(store, NS)
    writer = FactWriter(store)
    with pytest.raises(ValidationError) as info:
        writer.add_facts(
            [
                NewFact(text="fine fact about tomatoes", id="ok"),
                NewFact(subject="Melanie", predicate="", id="bad"),
                NewFact(text="dup", id="ok"),
                NewFact(text="x", metadata={"n": float("nan")}),
            ],
            namespace=NS,
        )
    fields = {(e.field, e.code) for e in info.value.errors}
    assert {
        ("[1].predicate", "empty"),
        ("[1].object", "missing"),
        ("[2].id", "duplicate"),
        ("[3].metadata", "not_json"),
    } <= fields
    assert stats(store, NS) == before


def test_existing_id_needs_replace(store: MemoryStore) -> None:
    """Writing an existing fact id is an error unless replace is asked; replace re-indexes."""
    writer = FactWriter(store)
    writer.add_fact("Caroline likes hiking", namespace=NS, id="h")
    with pytest.raises(ValidationError, match="exists"):
        writer.add_fact("Caroline likes climbing", namespace=NS, id="h")
    before = stats(store, NS)
    writer.add_fact("Caroline likes climbing", namespace=NS, id="h", replace=True)
    assert stats(store, NS)[2] == before[2]


def test_delete_keeps_index_and_statistics_consistent(store: MemoryStore) -> None:
    """Deleting a fact removes it from the FTS index and the namespace statistics."""
    before = stats(store, NS)
    writer = FactWriter(store)
    writer.add_fact(SHARED, namespace=NS, id="gone")
    assert stats(store, NS) != before
    assert writer.delete_fact("gone", namespace=NS) is True
    assert stats(store, NS) == before
    assert writer.delete_fact("gone", namespace=NS) is False
    assert writer.delete_fact("gone", namespace=Namespace(tenant_id="nobody")) is False


@pytest.mark.parametrize("task", ["what time is it", "hi", "tell me a joke"])
async def test_trivial_task_gets_nothing_above_the_floor(store: MemoryStore, task: str) -> None:
    """A trivial task gets no above-floor fact."""
    FactWriter(store).add_fact(SHARED, namespace=NS)
    assert all(c.score < 0.42 for c in await source(store).fetch(SourceRequest(task=task, namespace=NS)))


async def test_namespace_isolation(store: MemoryStore) -> None:
    """Facts of one namespace never answer another's task."""
    FactWriter(store).add_fact(SHARED, namespace=NS, id="a")
    FactWriter(store).add_fact("Bob repaired the bicycle chain.", namespace=OTHER, id="b")
    got = await source(store).fetch(SourceRequest(task=TASK, namespace=OTHER))
    assert "fact:a" not in {c.entry_id for c in got}
    assert await source(store).fetch(SourceRequest(task=TASK, namespace=Namespace(tenant_id="none"))) == []


async def test_typed_request_without_semantic_skips_facts(store: MemoryStore) -> None:
    """Facts are semantic memories: a typed request for other types gets none."""
    FactWriter(store).add_fact(SHARED, namespace=NS, id="a")
    src = source(store)
    assert await src.fetch(SourceRequest(task=TASK, namespace=NS, types=("episodic",))) == []
    got = await src.fetch(SourceRequest(task=TASK, namespace=NS, types=("semantic",)))
    assert "fact:a" in {c.entry_id for c in got}


async def test_a_request_deeper_than_the_shared_retrieval_searches_itself_and_agrees(
    store: MemoryStore,
) -> None:
    """A limit whose depth exceeds the turn's shared retrieval searches its corpus alone, same best."""
    facts = [
        NewFact(text=f"Caroline went to support group meeting number {i}.", id=f"g{i}") for i in range(60)
    ]
    FactWriter(store).add_facts(facts, namespace=NS)
    reader = StoreReader(store=store)
    shared = await AbstractionSource(reader).fetch(SourceRequest(task=TASK, namespace=NS, limit=10))
    deep = await AbstractionSource(reader).fetch(SourceRequest(task=TASK, namespace=NS, limit=13))
    assert len(shared) == 10
    assert len(deep) == 13
    assert [(c.entry_id, c.score) for c in deep[:10]] == [(c.entry_id, c.score) for c in shared]


async def test_a_lexical_fetch_reads_the_rows_of_only_the_facts_that_clear_the_floor(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Facts are scored on their indexed terms first: a fact under the floor is never read."""
    writer = FactWriter(store)
    writer.add_fact(SHARED, namespace=NS, id="shared")
    for i, text in enumerate(("Caroline likes tea", "The support desk opens at nine", "A meeting was moved")):
        writer.add_fact(text, namespace=NS, id=f"weak{i}")
    with store.engine.read(ReadStop()) as conn:
        docs = type(conn.docs)
    read: list[int] = []
    rows = docs.rows
    monkeypatch.setattr(
        docs,
        "rows",
        lambda self, table, ns_id, rowids, cols: (
            read.extend(rowids) or rows(self, table, ns_id, rowids, cols)
        ),
    )
    found = await source(store).fetch(SourceRequest(task=TASK, namespace=NS, limit=50))
    assert [c.entry_id for c in found][:1] == ["fact:shared"]
    assert len(read) == len(found)
    read.clear()
    low = AbstractionSource(StoreReader(store=store), min_score=0.0)
    everything = await low.fetch(SourceRequest(task=TASK, namespace=NS, limit=50))
    assert len(read) == len(everything) > len(found)
