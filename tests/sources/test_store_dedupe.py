"""The store's write path (`MemoryStore.add_entries`): identical text without an id is one
entry per namespace, found again instead of stored twice, unless the caller asks otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_kit import StoreOpener, sql_rows

from broker import Namespace, ValidationError
from sources import MemoryStore, NewEntry, content_id
from sources.storage import _engine
from sources.storage._vectors import Slot

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

A = Namespace(tenant_id="acme", project_id="p1")
B = Namespace(tenant_id="acme", project_id="p2")


class TextRecordingEmbedder:
    """A fake embedder that records every text it is asked to embed."""

    model_id = "fake"
    dim = 2

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return unit rows, recording the texts."""
        self.texts += texts
        return np.tile(np.array([1.0, 0.0], dtype=np.float32), (len(texts), 1))


@pytest.fixture
def store(make_store: StoreOpener) -> MemoryStore:
    """An empty lexical store on the engine under test."""
    return make_store(mode="lexical")


def count(store: MemoryStore, ns: Namespace = A) -> int:
    return int(store.stats(namespace=ns)["entries"])


def test_the_same_text_twice_is_one_entry_with_one_id(store: MemoryStore) -> None:
    """Writing a text again returns the id already stored and writes nothing."""
    first = store.add_entry("Deploys freeze every Friday", namespace=A)
    again = store.add_entry("Deploys freeze every Friday", namespace=A, memory_type="procedural")
    assert first == again == content_id("Deploys freeze every Friday")
    assert count(store) == 1
    memory = store.get(first, namespace=A)
    assert memory is not None
    assert memory.memory_type is None  # the first write stands; only replace rewrites it


def test_repeats_within_one_batch_are_written_once(store: MemoryStore) -> None:
    """A batch repeating a text returns the same id at each position and stores one entry."""
    ids = store.add_entries(
        [NewEntry(text="alpha note"), NewEntry(text="beta note"), NewEntry(text="alpha note")], namespace=A
    )
    assert ids[0] == ids[2] != ids[1]
    assert count(store) == 2


def test_the_same_text_in_another_namespace_is_its_own_entry(store: MemoryStore) -> None:
    """Deduplication is per namespace: another project stores its own copy."""
    assert store.add_entry("shared words", namespace=A) == store.add_entry("shared words", namespace=B)
    assert (count(store, A), count(store, B)) == (1, 1)


def test_dedupe_false_stores_every_copy(store: MemoryStore) -> None:
    """`dedupe=False` is the caller asking for copies: random ids, one row each."""
    ids = [store.add_entry("same text", namespace=A, dedupe=False) for _ in range(2)]
    assert ids[0] != ids[1]
    assert content_id("same text") not in ids
    assert count(store) == 2


def test_replace_rewrites_the_stored_text_instead_of_adding_one(store: MemoryStore) -> None:
    """With replace, an id-less text rewrites its one entry (new fields), never a second row."""
    store.add_entry("release notes go out on Thursday", namespace=A)
    store.add_entries(
        [NewEntry(text="release notes go out on Thursday", memory_type="procedural")],
        namespace=A,
        replace=True,
    )
    assert count(store) == 1
    memory = store.get(content_id("release notes go out on Thursday"), namespace=A)
    assert memory is not None
    assert memory.memory_type == "procedural"


def test_an_explicit_id_is_the_callers_identity(store: MemoryStore) -> None:
    """An entry given an id is stored under it even if its text is already stored without one."""
    store.add_entry("twice told", namespace=A)
    assert store.add_entry("twice told", namespace=A, id="mine") == "mine"
    assert count(store) == 2
    with pytest.raises(ValidationError) as info:
        store.add_entry("twice told", namespace=A, id="mine")
    assert info.value.errors[0].code == "exists"


def test_texts_already_stored_are_not_embedded_again(make_store: StoreOpener) -> None:
    """Re-writing a batch embeds only the texts the namespace does not hold yet."""
    fake = TextRecordingEmbedder()
    with make_store(mode="lexical", embedder=fake) as store:
        store.add_entries([NewEntry(text="one"), NewEntry(text="two")], namespace=A)
        store.add_entries([NewEntry(text="two"), NewEntry(text="three")], namespace=A)
        assert fake.texts == ["one", "two", "three"]
        assert store.vector_status(namespace=A) == {"current": 3, "stale": 0, "missing": 0}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.sampled_from(["red apple", "green pear", "blue plum", "red  apple"]), max_size=8))
def test_ids_are_equal_exactly_when_texts_are(store: MemoryStore, texts: list[str]) -> None:
    """For any batch, ids match iff texts match, and one entry per distinct text is stored."""
    ns = Namespace(tenant_id="prop", project_id=f"p{abs(hash(tuple(texts))) % 10**9}")
    before = count(store, ns)
    ids = store.add_entries([NewEntry(text=t) for t in texts], namespace=ns)
    for i, a in enumerate(texts):
        for j, b in enumerate(texts):
            assert (ids[i] == ids[j]) == (a == b)
    assert count(store, ns) == max(before, len(set(texts)))


class LengthEmbedder:
    """A fake embedder whose vector records the text's length, so a misplaced row shows."""

    model_id = "length"
    dim = 2

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return [len(text), 1] per text."""
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32).reshape(len(texts), 2)


def test_sorting_texts_by_length_keeps_each_vector_with_its_row(make_store: StoreOpener) -> None:
    """The write embeds texts shortest first across batches; every row still gets its own vector."""
    texts = [("word " * ((i * 7919) % 300 + 1)).strip() + f" {i}" for i in range(600)]
    with make_store(mode="lexical", embedder=LengthEmbedder()) as store:
        store.add_entries([NewEntry(text=t) for t in texts], namespace=A)
        rows = dict(sql_rows(store, "SELECT rowid, text FROM entries"))
        (ns_id,) = {r[0] for r in sql_rows(store, "SELECT ns_id FROM entries")}
        with store.db.read() as conn:
            vectors = conn.stored_vectors(Slot(ns_id, _engine.CORPUS_ENTRIES), list(rows), "length", 2)
    assert len(vectors) == len(texts)
    # Stored as unit rows (`sources.embedding._checked` scales them): the length is the ratio of the two values.
    assert all(
        vectors[rowid][0] / vectors[rowid][1] == pytest.approx(len(text), rel=1e-5)
        for rowid, text in rows.items()
    )
