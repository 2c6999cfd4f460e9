"""Tests of dense and hybrid recall in the store: the one calibrated floor in every mode, on both
engines (`make_store`, tests/sources/conftest.py)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import attrs
import numpy as np
import pytest
from store_kit import sql_rows

from broker import ConfigError, Namespace, ValidationError
from sources import MemoryStore, NewEntry, embed_and_store_vectors
from sources._abstraction import FactWriter
from sources.embedding._embedder import MiniLMEmbedder, load_default_embedder
from sources.storage import _engine, _vectors
from sources.storage._vectors import Slot

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    import numpy.typing as npt
    from store_kit import StoreOpener

A = Namespace(tenant_id="alice", project_id="p")
B = Namespace(tenant_id="bob", project_id="p")
NOTES = (
    "I adopted a golden retriever puppy last week",
    "My sister moved to Berlin for her new job at a bank",
    "We grilled burgers and corn at the barbecue on Saturday",
    "The quarterly report is due on the fifth of March",
    "I started learning the violin in January",
    "Our flight to Lisbon was delayed by three hours",
    "The meeting with the landlord is about the broken heater",
    "My favourite novel is about a lighthouse keeper",
)
TRIVIAL = (
    "thanks!",
    "hi",
    "ok",
    "what time is it",
    "tell me a joke",
    "write a haiku about autumn",
    "what's 2 + 2",
)


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """One embedder for the module (loading costs about 0.2 s)."""
    return load_default_embedder()


@attrs.frozen
class RenamedEmbedder:
    """The real model under another id: what a model upgrade looks like to the store."""

    inner: MiniLMEmbedder
    model_id: str = "some-older-model:0"

    @property
    def dim(self) -> int:
        """Return the wrapped model's dimension."""
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed with the wrapped model."""
        return self.inner.embed(texts)


@pytest.fixture
def store(make_store: StoreOpener, embedder: MiniLMEmbedder) -> MemoryStore:
    """Open a hybrid store holding NOTES in namespace A."""
    s = make_store(mode="hybrid", embedder=embedder)
    s.add_entries([NewEntry(text=t, id=f"n{i}") for i, t in enumerate(NOTES)], namespace=A)
    return s


def _ids(store: MemoryStore, query: str, *, mode: str, ns: Namespace = A, floor: float = 0.0) -> list[str]:
    return [r.memory.id for r in store.recall(query, namespace=ns, mode=mode, min_score=floor)]


def test_dense_and_hybrid_find_a_paraphrase_lexical_misses(store: MemoryStore) -> None:
    """A question sharing no term with its memory is found, ranked first, by dense and hybrid only."""
    query = "did they get a dog?"
    assert _ids(store, query, mode="lexical") == []
    assert _ids(store, query, mode="dense")[0] == "n0"
    assert _ids(store, query, mode="hybrid")[0] == "n0"


def test_scores_are_probabilities_in_every_mode(store: MemoryStore) -> None:
    """Every mode returns scores in [0, 1], best first."""
    for mode in ("lexical", "dense", "hybrid"):
        scores = [r.score for r in store.recall("sister Berlin job", namespace=A, mode=mode, min_score=0.0)]
        assert scores
        assert all(0.0 <= s <= 1.0 for s in scores)
        assert scores == sorted(scores, reverse=True)


def test_trivial_tasks_recall_nothing_in_dense_modes(store: MemoryStore) -> None:
    """A cosine is never zero, yet trivial tasks recall nothing at the floor in dense and hybrid mode."""
    for mode in ("dense", "hybrid"):
        for task in TRIVIAL:
            assert _ids(store, task, mode=mode, floor=0.42) == [], (mode, task)


def test_query_without_informative_terms_scores_zero(store: MemoryStore) -> None:
    """Stop words and punctuation alone abstain outright in dense mode, even with no floor."""
    assert _ids(store, "thanks!", mode="dense") == []
    assert _ids(store, "are you there?", mode="hybrid") == []


def test_vectors_never_cross_namespaces(store: MemoryStore) -> None:
    """Dense recall in one tenant never returns another tenant's memory, even its exact text."""
    store.add_entry("I planted tomatoes in the garden", namespace=B, id="b0")
    for mode in ("dense", "hybrid"):
        assert set(_ids(store, NOTES[0], mode=mode, ns=B)) <= {"b0"}
        assert "b0" not in _ids(store, "I planted tomatoes in the garden", mode=mode)


def test_delete_removes_the_vector(store: MemoryStore) -> None:
    """Deleting a memory removes its vector row and it is never recalled again, in any mode."""
    assert _ids(store, NOTES[4], mode="dense")[0] == "n4"
    assert store.delete("n4", namespace=A)
    assert sql_rows(store, "SELECT count(*) FROM vectors") == [(len(NOTES) - 1,)]
    for mode in ("dense", "hybrid"):
        assert "n4" not in _ids(store, NOTES[4], mode=mode)


def test_replace_reembeds(store: MemoryStore) -> None:
    """Replacing a memory's text replaces its vector: dense recall follows the new text."""
    store.add_entry("We bought a sailing boat", namespace=A, id="n2", replace=True)
    assert _ids(store, "a boat on the sea", mode="dense")[0] == "n2"
    assert sql_rows(store, "SELECT count(*) FROM vectors") == [(len(NOTES),)]


def test_typed_filter_applies_to_dense_candidates(make_store: StoreOpener, embedder: MiniLMEmbedder) -> None:
    """A typed dense query returns only memories of those types or unclassified ones."""
    with make_store(mode="hybrid", embedder=embedder) as s:
        s.add_entries(
            [
                NewEntry(text="I love hiking in the mountains", id="e", memory_type="episodic"),
                NewEntry(text="Hiking boots need waterproofing", id="s", memory_type="semantic"),
                NewEntry(text="Mountains are cold at night", id="u"),
            ],
            namespace=A,
        )
        got = {
            r.memory.id
            for r in s.recall("hiking", namespace=A, types=["semantic"], mode="dense", min_score=0.0)
        }
    assert got == {"s", "u"}


def test_model_change_is_detected_and_reindex_fixes_it(
    make_store: StoreOpener, embedder: MiniLMEmbedder
) -> None:
    """Vectors of an older model are stale (dense search ignores them) until reindex re-embeds them."""
    with make_store(mode="hybrid", embedder=RenamedEmbedder(embedder)) as old:
        old.add_entries([NewEntry(text=t, id=f"n{i}") for i, t in enumerate(NOTES)], namespace=A)
    with make_store(mode="hybrid", embedder=embedder) as s:
        assert s.vector_status() == {"current": 0, "stale": len(NOTES), "missing": 0}
        assert _ids(s, "did they get a dog?", mode="dense") == []
        calls: list[tuple[int, int]] = []
        assert s.reindex(progress=lambda done, total: calls.append((done, total))) == len(NOTES)
        assert calls[-1] == (len(NOTES), len(NOTES))
        assert s.vector_status() == {"current": len(NOTES), "stale": 0, "missing": 0}
        assert _ids(s, "did they get a dog?", mode="dense")[0] == "n0"
        assert s.reindex() == 0


@attrs.frozen
class ShortEmbedder:
    """The real model's id and vectors, one value short: a misconfigured model under a real id."""

    inner: MiniLMEmbedder

    @property
    def model_id(self) -> str:
        """Return the wrapped model's id."""
        return self.inner.model_id

    @property
    def dim(self) -> int:
        """One less than the wrapped model's dimension."""
        return self.inner.dim - 1

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed with the wrapped model, dropping the last value of each row."""
        rows = self.inner.embed(texts)[:, :-1]
        return rows / np_norm(rows)


def np_norm(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Each row's length, as a column."""
    out: npt.NDArray[np.float32] = np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def test_vectors_of_another_length_under_the_models_id_are_stale_until_reindex(
    make_store: StoreOpener, embedder: MiniLMEmbedder
) -> None:
    """Vectors a model of the same id but another dimension wrote are counted stale, left out of
    search, and embedded again by reindex, not taken as current."""
    with make_store(mode="hybrid", embedder=ShortEmbedder(embedder)) as short:
        short.add_entries([NewEntry(text=t, id=f"n{i}") for i, t in enumerate(NOTES)], namespace=A)
    with make_store(mode="hybrid", embedder=embedder) as s:
        assert s.vector_status() == {"current": 0, "stale": len(NOTES), "missing": 0}
        assert _ids(s, "did they get a dog?", mode="dense") == []
        assert s.reindex() == len(NOTES)
        assert s.vector_status() == {"current": len(NOTES), "stale": 0, "missing": 0}
        assert _ids(s, "did they get a dog?", mode="dense")[0] == "n0"


def test_lexical_store_loads_no_model_and_refuses_dense(make_store: StoreOpener) -> None:
    """mode='lexical' writes no vectors and a dense recall on it is a ConfigError, not a silent model load."""
    with make_store(mode="lexical") as s:
        assert s.embedder is None
        s.add_entry("I adopted a puppy", namespace=A)
        assert sql_rows(s, "SELECT count(*) FROM vectors") == [(0,)]
        assert [r.memory.text for r in s.recall("puppy", namespace=A, min_score=0.0)] == ["I adopted a puppy"]
        with pytest.raises(ConfigError):
            s.recall("puppy", namespace=A, mode="hybrid")
        with pytest.raises(ConfigError):
            s.reindex()


def test_missing_vectors_are_filled_by_reindex(make_store: StoreOpener, embedder: MiniLMEmbedder) -> None:
    """Entries written without a model get vectors from reindex; hybrid still scores them meanwhile."""
    with make_store(mode="lexical") as s:
        s.add_entries([NewEntry(text=t, id=f"n{i}") for i, t in enumerate(NOTES)], namespace=A)
    with make_store(mode="hybrid", embedder=embedder) as s:
        assert s.vector_status()["missing"] == len(NOTES)
        before = {r.memory.id: r.score for r in s.recall("violin lessons", namespace=A, min_score=0.0)}
        assert "n4" in before
        assert s.reindex() == len(NOTES)
        after = {r.memory.id: r.score for r in s.recall("violin lessons", namespace=A, min_score=0.0)}
        # Meanwhile the namespace has no best cosine to stand against, so nothing gains
        # standing; once embedded, the best match gains it and no score falls.
        assert after["n4"] > before["n4"]
        assert all(after[k] >= before[k] - 1e-9 for k in before)


def test_unknown_mode_is_a_validation_error(store: MemoryStore, tmp_path: Path) -> None:
    """An unknown mode names the field, on recall and on open."""
    with pytest.raises(ValidationError) as err:
        store.recall("puppy", namespace=A, mode="fuzzy")
    assert err.value.errors[0].field == "mode"
    with pytest.raises(ValidationError):
        MemoryStore.open(tmp_path / "y.db", mode="fuzzy")


def test_ingest_reports_progress(make_store: StoreOpener, embedder: MiniLMEmbedder) -> None:
    """add_entries reports embedding progress per batch, ending at the total."""
    calls: list[tuple[int, int]] = []
    entries = [NewEntry(text=f"note number {i} about topic {i % 7}") for i in range(300)]
    with make_store(mode="hybrid", embedder=embedder) as s:
        s.add_entries(entries, namespace=A, progress=lambda d, t: calls.append((d, t)))
        assert s.vector_status() == {"current": 300, "stale": 0, "missing": 0}
    assert calls == [(256, 300), (300, 300)]


@pytest.mark.parametrize("mode", ["lexical", "dense", "hybrid"])
def test_scorer_matches_recall_for_texts_without_vectors(store: MemoryStore, mode: str) -> None:
    """Another source scoring a text with no stored vector gets the store's exact score for it."""
    query = "where did her sister move for work?"
    recalled = {r.memory.text: r.score for r in store.recall(query, namespace=A, mode=mode, min_score=0.0)}
    with store.db.read() as conn:
        scorer = store.scorer(conn, query, namespace=A, mode=mode)
    scores = scorer.score_texts(list(recalled))
    assert scores == pytest.approx(list(recalled.values()), abs=1e-6)


def test_embed_and_store_vectors_for_other_corpora(store: MemoryStore, embedder: MiniLMEmbedder) -> None:
    """Other sources store their vectors with the model id, found by a search of their own corpus."""
    with store.db.write() as conn:
        ns_id = conn.namespace_id(A)
        assert ns_id is not None
        embed_and_store_vectors(
            conn,
            Slot(ns_id, _engine.CORPUS_FACTS),
            [7, 8],
            ["Bob is allergic to peanuts", "Paris is in France"],
            embedder=embedder,
        )
    index = _vectors.VectorIndex(model_id=embedder.model_id, dim=embedder.dim)
    with store.db.read() as conn:
        hits = index.search(conn, Slot(ns_id, _engine.CORPUS_FACTS), embedder.embed(["peanut allergy"])[0], 5)
    models = {r[0] for r in sql_rows(store, "SELECT model_id FROM vectors WHERE corpus = 1")}
    assert [h.rowid for h in hits] == [7, 8]
    assert models == {embedder.model_id}


def test_default_mode_is_hybrid_and_overridable(make_store: StoreOpener, embedder: MiniLMEmbedder) -> None:
    """recall() without a mode uses the store's default (hybrid unless opened otherwise)."""
    with make_store(mode=None, embedder=embedder) as s:
        s.add_entry(NOTES[0], namespace=A, id="n0")
        assert s.mode == "hybrid"
        assert [r.memory.id for r in s.recall("did they get a dog?", namespace=A, min_score=0.0)] == ["n0"]
    with make_store(embedder=embedder, mode="lexical") as s:
        assert s.recall("did they get a dog?", namespace=A, min_score=0.0) == []
        assert [
            r.memory.id for r in s.recall("did they get a dog?", namespace=A, min_score=0.0, mode="dense")
        ] == ["n0"]


def test_dense_recall_sees_writes_made_while_reading(
    make_store: StoreOpener, embedder: MiniLMEmbedder
) -> None:
    """Readers in threads never fail while a writer adds memories, and afterwards see every one."""
    texts = [
        f"the {w} festival in town number {i}" for i, w in enumerate(("jazz", "kite", "film", "wine") * 5)
    ]
    errors: list[BaseException] = []
    with make_store(mode="hybrid", embedder=embedder) as s:
        s.add_entry("an unrelated first memory about taxes", namespace=A)

        def read() -> None:
            try:
                for _ in range(20):
                    s.recall("a festival", namespace=A, mode="dense", min_score=0.0, limit=50)
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        readers = [threading.Thread(target=read) for _ in range(3)]
        for t in readers:
            t.start()
        for i, text in enumerate(texts):
            s.add_entry(text, namespace=A, id=f"f{i}")
        for t in readers:
            t.join()
        got = {
            r.memory.id for r in s.recall("a festival", namespace=A, mode="dense", min_score=0.0, limit=50)
        }
    assert errors == []
    assert got >= {f"f{i}" for i in range(len(texts))}


def test_reference_best_cosine_spans_the_namespace_corpora(
    store: MemoryStore, embedder: MiniLMEmbedder
) -> None:
    """In dense modes the reference is the best cosine over every stored vector of the namespace."""
    query = "did they get a dog?"
    FactWriter(store).add_fact("They brought home a puppy, a small dog.", namespace=A, id="dog")
    qvec = embedder.embed([query])[0]
    every = [*NOTES, "They brought home a puppy, a small dog."]
    best = float(max(embedder.embed(every) @ qvec))
    with store.db.read() as conn:
        ref = store.scorer(conn, query, namespace=A, mode="hybrid").reference
    assert ref.best_cosine == pytest.approx(best, abs=1e-5)


def test_typed_recall_scores_like_untyped(store: MemoryStore) -> None:
    """The reference ignores the typed filter: a memory scores the same in typed and untyped hybrid recall."""
    store.add_entry(
        "I walk the golden retriever puppy every morning", namespace=A, id="t", memory_type="episodic"
    )
    query = "how is the puppy doing"
    untyped = {r.memory.id: r.score for r in store.recall(query, namespace=A, min_score=0.0, limit=50)}
    typed = {
        r.memory.id: r.score for r in store.recall(query, namespace=A, types=["episodic"], min_score=0.0)
    }
    assert "t" in typed
    for key, score in typed.items():
        assert score == pytest.approx(untyped[key])


def test_a_namespace_without_current_vectors_has_no_dense_reference(
    make_store: StoreOpener, embedder: MiniLMEmbedder
) -> None:
    """Memories written without a model have no vectors: the reference names no best cosine."""
    with make_store(mode="lexical") as lexical:
        lexical.add_entries([NewEntry(text=t) for t in NOTES], namespace=A)
    with make_store(mode="hybrid", embedder=embedder) as hybrid:
        with hybrid.db.read() as conn:
            ref = hybrid.scorer(conn, "did they get a dog?", namespace=A, mode="hybrid").reference
        assert ref.best_cosine is None
        assert hybrid.recall("golden retriever puppy", namespace=A, min_score=0.0)  # embedded on the fly
