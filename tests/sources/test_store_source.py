"""Tests of the `store` source and the typed `persona` lane."""

from __future__ import annotations

import pytest

from broker import RECALL_MIN_SCORE, ConfigError, Namespace
from broker.abc import Source, SourceRequest
from sources import MemoryStore
from sources._neurons import NeuronWriter
from sources._store_reader import StoreReader
from sources._store_source import PersonaSource, StoreSource

NS = Namespace(tenant_id="alice")
OTHER = Namespace(tenant_id="bob")
TYPED = {
    "self": "I calm my stage nerves before every violin recital with quiet breathing.",
    "personality": "Calm by nature, yet stage nerves before a violin recital still appear.",
    "episodic": "Stage nerves hit hard at the violin recital; a calm walk helped on Sunday.",
    "semantic": "Stage nerves before a violin recital are common; calm routines help players.",
    None: "Violin recital stage nerves came up again; tuning strings kept me calm.",
}
TASK = "how do I calm my stage nerves before the violin recital"


@pytest.fixture
def store(background_store: MemoryStore) -> MemoryStore:
    for mtype, text in TYPED.items():
        background_store.add_entry(text, namespace=NS, memory_type=mtype, id=f"t-{mtype}")
    return background_store


def sources(store: MemoryStore) -> tuple[StoreSource, PersonaSource]:
    reader = StoreReader(store=store)
    return StoreSource(reader, store=store), PersonaSource(reader, store=store)


async def test_store_source_returns_above_floor_typed_recall(store: MemoryStore) -> None:
    """The store source returns the store's gated recall: every score is at or above the floor."""
    src, _ = sources(store)
    assert isinstance(src, Source)
    await src.open()
    got = await src.fetch(SourceRequest(task=TASK, namespace=NS))
    assert got, "the violin memories are relevant"
    assert all(c.score >= RECALL_MIN_SCORE and c.source == "store" and c.block == "memory" for c in got)
    assert [c.score for c in got] == sorted((c.score for c in got), reverse=True)
    typed = await src.fetch(SourceRequest(task=TASK, namespace=NS, types=("episodic",)))
    assert {c.memory_type for c in typed} <= {"episodic", None}
    assert "t-episodic" in {c.entry_id for c in typed}


async def test_persona_lane_returns_only_self_personality_or_unclassified(store: MemoryStore) -> None:
    """The persona lane never surfaces episodic or semantic rows, and includes NULL rows."""
    _, persona = sources(store)
    await persona.open()
    got = await persona.fetch(SourceRequest(task=TASK, namespace=NS))
    assert got
    assert {c.memory_type for c in got} <= {"self", "personality", None}
    assert all(c.block == "persona_memories" and c.source == "persona" for c in got)
    store_ids = {c.entry_id for c in await sources(store)[0].fetch(SourceRequest(task=TASK, namespace=NS))}
    assert "t-episodic" in store_ids  # the same task does reach the episodic row via the store


async def test_persona_lane_follows_the_requests_types(store: MemoryStore) -> None:
    """A typed request runs the persona lane only for the persona types it asks for."""
    _, persona = sources(store)
    assert await persona.fetch(SourceRequest(task=TASK, namespace=NS, types=("episodic",))) == []
    got = await persona.fetch(SourceRequest(task=TASK, namespace=NS, types=("self", "episodic")))
    assert got
    assert {c.memory_type for c in got} <= {"self", None}


@pytest.mark.parametrize("task", ["what time is it", "hi", "tell me a joke", "thanks!"])
async def test_trivial_task_recalls_nothing(store: MemoryStore, task: str) -> None:
    """A trivial task gets no candidate from the store or the persona lane."""
    for src in sources(store):
        assert await src.fetch(SourceRequest(task=task, namespace=NS)) == []


async def test_namespace_isolation(store: MemoryStore) -> None:
    """Another namespace's memories never come back, even for a task that matches them."""
    store.add_entry("Grocery list: oat milk and apples.", namespace=OTHER, id="b1")
    for src in sources(store):
        assert await src.fetch(SourceRequest(task=TASK, namespace=OTHER)) == []
        assert await src.fetch(SourceRequest(task=TASK, namespace=Namespace(tenant_id="nobody"))) == []


async def test_the_requests_mode_reaches_the_store(store: MemoryStore) -> None:
    """The request's mode is passed to the store: a dense mode on a lexical store is refused."""
    src, persona = sources(store)
    default = await src.fetch(SourceRequest(task=TASK, namespace=NS))
    lexical = await src.fetch(SourceRequest(task=TASK, namespace=NS, mode="lexical"))
    assert [(c.entry_id, c.score) for c in lexical] == [(c.entry_id, c.score) for c in default]
    for source in (src, persona):
        with pytest.raises(ConfigError):
            await source.fetch(SourceRequest(task=TASK, namespace=NS, mode="hybrid"))


async def test_a_neuron_enters_only_through_its_triggers_never_the_store_source(store: MemoryStore) -> None:
    """A neuron whose text matches the task is not a `store` candidate: it fires only when the
    task holds one of its trigger phrases (the neurons source)."""
    NeuronWriter(store).add_neuron(
        "Calm breathing before a violin recital settles stage nerves.",
        namespace=NS,
        triggers=["integration suite"],
        id="n-calm",
    )
    source, _ = sources(store)
    found = await source.fetch(SourceRequest(task=TASK, namespace=NS, limit=50))
    assert "t-self" in {c.entry_id for c in found}
    assert "n-calm" not in {c.entry_id for c in found}
    assert "n-calm" in {r.memory.id for r in store.recall(TASK, namespace=NS, limit=50, min_score=0.0)}
