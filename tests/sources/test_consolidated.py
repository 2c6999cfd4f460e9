"""Tests of consolidated knowledge: the writer and the `consolidated` source."""

from __future__ import annotations

import pytest
from store_kit import indexed, sql_rows

from broker import RECALL_MIN_SCORE, Namespace, ValidationError
from broker.abc import SourceRequest
from sources import MemoryStore
from sources._abstraction import AbstractionSource, FactWriter
from sources._consolidated import ConsolidatedSource, KnowledgeWriter
from sources._store_reader import StoreReader
from sources.storage._engine import CORPUS_KNOWLEDGE

NS = Namespace(tenant_id="alice")
OTHER = Namespace(tenant_id="bob")
SUMMARY = (
    "Caroline and Melanie talked about the LGBTQ support group, adoption agencies, "
    "and Melanie's charity race for mental health."
)
TASK = "What did Caroline and Melanie say about the charity race for mental health?"


@pytest.fixture
def store(filler_store: MemoryStore) -> MemoryStore:
    return filler_store


def source(store: MemoryStore) -> ConsolidatedSource:
    return ConsolidatedSource(StoreReader(store=store))


async def test_knowledge_is_found_with_provenance(store: MemoryStore) -> None:
    """A relevant summary comes back in the consolidated block with its provenance ids."""
    KnowledgeWriter(store).add_knowledge(SUMMARY, namespace=NS, provenance=["D1:3", "D2:1"], id="s1")
    got = await source(store).fetch(SourceRequest(task=TASK, namespace=NS))
    [cand] = got
    assert cand.entry_id == "knowledge:s1"
    assert cand.block == "consolidated"
    assert cand.metadata["provenance"] == ["D1:3", "D2:1"]
    assert cand.score >= RECALL_MIN_SCORE


async def test_no_flat_score_shortcut(store: MemoryStore) -> None:
    """Knowledge is scored like a fact with the same text: no fixed score of its own."""
    KnowledgeWriter(store).add_knowledge(SUMMARY, namespace=NS, provenance=["D1:3"], id="s1")
    FactWriter(store).add_fact(SUMMARY, namespace=NS, id="same")
    reader = StoreReader(store=store)
    for task in (TASK, "Melanie charity race", "adoption agencies"):
        request = SourceRequest(task=task, namespace=NS)
        # Floors at 0: below-floor scores are compared too.
        knowledge = await ConsolidatedSource(reader, min_score=0.0).fetch(request)
        facts = await AbstractionSource(reader, min_score=0.0).fetch(request)
        assert knowledge
        assert [c.score for c in knowledge] == [c.score for c in facts]


@pytest.mark.parametrize("task", ["what time is it", "hi", "tell me a joke"])
async def test_trivial_task_gets_nothing_above_the_floor(store: MemoryStore, task: str) -> None:
    """A trivial task gets no above-floor knowledge."""
    KnowledgeWriter(store).add_knowledge(SUMMARY, namespace=NS, provenance=["D1:3"])
    got = await source(store).fetch(SourceRequest(task=task, namespace=NS))
    assert all(c.score < RECALL_MIN_SCORE for c in got)


def test_invalid_knowledge_reports_every_field(store: MemoryStore) -> None:
    """Bad text, a bare-string provenance and a bad id are all reported; nothing is written."""
    writer = KnowledgeWriter(store)
    with pytest.raises(ValidationError) as info:
        writer.add_knowledge("", namespace=NS, provenance="D1:3", id="")
    assert {e.field for e in info.value.errors} == {"text", "provenance", "id"}
    with pytest.raises(ValidationError) as info:
        writer.add_knowledge("ok text", namespace=NS, provenance=["D1:3", None])  # type: ignore[list-item]
    assert [e.field for e in info.value.errors] == ["provenance[1]"]
    with pytest.raises(ValidationError):
        writer.add_knowledge("ok text", namespace=NS, provenance=[])
    assert sql_rows(store, "SELECT count(*) FROM knowledge") == [(0,)]


def test_delete_keeps_index_and_statistics_consistent(store: MemoryStore) -> None:
    """Deleting knowledge removes it from the text index and the namespace statistics."""
    query = "SELECT ns_id, n_docs, total_len FROM namespaces WHERE tenant_id = 'alice'"
    before = sql_rows(store, query)
    writer = KnowledgeWriter(store)
    writer.add_knowledge(SUMMARY, namespace=NS, provenance=["D1:3"], id="k")
    assert writer.delete_knowledge("k", namespace=NS) is True
    assert writer.delete_knowledge("k", namespace=NS) is False
    assert sql_rows(store, query) == before
    assert indexed(store, before[0][0], CORPUS_KNOWLEDGE) == 0


async def test_namespace_isolation(store: MemoryStore) -> None:
    """Knowledge of one namespace never answers another's task."""
    KnowledgeWriter(store).add_knowledge(SUMMARY, namespace=NS, provenance=["D1:3"], id="a")
    KnowledgeWriter(store).add_knowledge("Bob repaired a bike.", namespace=OTHER, provenance=["x"])
    assert await source(store).fetch(SourceRequest(task=TASK, namespace=OTHER)) == []


async def test_typed_requests_still_see_unclassified_knowledge(store: MemoryStore) -> None:
    """Knowledge is unclassified, so any typed request may receive it."""
    KnowledgeWriter(store).add_knowledge(SUMMARY, namespace=NS, provenance=["D1:3"], id="a")
    got = await source(store).fetch(SourceRequest(task=TASK, namespace=NS, types=("self",)))
    assert [c.memory_type for c in got] == [None]
