"""A synthetic corpus for the latency benchmarks: Zipf-distributed words over the six sources.

Words are the alphabetic, non-stop-word entries of the embedding model's WordPiece vocabulary
(real English words, one word piece each). Word frequencies follow a Zipf-Mandelbrot law
p(r) ~ 1 / (r + q)^s over a shuffled ranking: the stop-word head of natural text is what the
analyser drops, so the content words a query sees start at rank q = the number of stop words.

Memories are 10-40 words, spread over the sources by `SHARES` (store entries, persona
entries, facts, knowledge, neurons with trigger phrases, graph nodes with edges). Tasks are
3-8 content words drawn from held-aside memories (never written), mixed with trivial tasks.
"""

from __future__ import annotations

import functools
import random
import time
from importlib.resources import files
from typing import TYPE_CHECKING, Final

import attrs
import numpy as np
import numpy.typing as npt

from broker import Namespace
from sources import MemoryStore, NewEntry, NewFact, NewNeuron, Writers
from sources._consolidated import _TABLE as KNOWLEDGE_TABLE
from sources._doc_tables import DocTable, insert_docs
from sources.storage import _engine
from sources.storage._analysis import STOP_WORDS, terms
from sources.storage._vectors import Slot

from . import _locomo

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

NS = Namespace(tenant_id="bench", project_id="synthetic")
ZIPF_S: Final = 1.0
ZIPF_Q: Final = float(len(STOP_WORDS))
"""Zipf-Mandelbrot offset: content words rank after the stop words the analyser drops, so
the most frequent content word has about the share of natural English's (0.1% of words)."""
SHARES: Final = {
    "store": 0.71,
    "persona": 0.04,
    "facts": 0.15,
    "knowledge": 0.06,
    "neurons": 0.02,
    "graphs": 0.02,
}
"""Share of the N memories each source holds."""
TRIVIAL_SHARE: Final = 0.2
"""Share of turns that are trivial tasks (must select nothing)."""
BATCH: Final = 20_000
_FALLBACK_TRIVIAL: Final = ("hi", "thanks!", "ok", "hello there", "what time is it?", "good morning")
_ENTRY_TYPES: Final = ("episodic", "semantic", "procedural")
_PERSONA_TYPES: Final = ("self", "personality")


def vocabulary() -> list[str]:
    """Real English content words: the model vocabulary's whole alphabetic words, stop words removed."""
    text = (files("sources") / "data" / "minilm-vocab.txt").read_text(encoding="utf-8")
    words = {w for w in text.split() if w.isascii() and w.isalpha() and 3 <= len(w) <= 12}
    # Keep only words the analyser indexes (a few stem to nothing informative).
    return sorted(w for w in words if w not in STOP_WORDS and terms(w))


@attrs.define(eq=False)
class Generator:
    """Draws memories and tasks from one seeded Zipf-Mandelbrot vocabulary."""

    seed: int = 0
    _rng: random.Random = attrs.field(init=False)
    _words: list[str] = attrs.field(init=False)
    _cum: list[float] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        words = vocabulary()
        self._rng.shuffle(words)
        self._words = words
        weights = (np.arange(1, len(words) + 1) + ZIPF_Q) ** -ZIPF_S
        self._cum = list(np.cumsum(weights / weights.sum()))

    def words(self, n: int) -> list[str]:
        return self._rng.choices(self._words, cum_weights=self._cum, k=n)

    def memory(self) -> str:
        return " ".join(self.words(self._rng.randint(10, 40)))

    def below(self, n: int) -> int:
        return self._rng.randrange(n)

    def name(self) -> str:
        return " ".join(self._rng.choices(self._words, k=2))

    def task(self, held: str) -> str:
        """3-8 distinct content words of a held-aside memory."""
        distinct = list(dict.fromkeys(held.split()))
        k = min(len(distinct), self._rng.randint(3, 8))
        return " ".join(self._rng.sample(distinct, k))

    def tasks(self, n: int, trivial: Sequence[str]) -> list[tuple[str, bool]]:
        """`n` tasks (text, is_trivial): held-aside content tasks mixed with trivial ones."""
        out = []
        for _ in range(n):
            if self._rng.random() < TRIVIAL_SHARE:
                out.append((self._rng.choice(list(trivial)), True))
            else:
                out.append((self.task(self.memory()), False))
        return out


def trivial_tasks() -> list[str]:
    """The shared trivial tasks when the dev data is present, else a few built-in ones."""
    return _locomo.trivial_tasks() if _locomo.TRIVIAL.exists() else list(_FALLBACK_TRIVIAL)


@attrs.frozen(kw_only=True)
class Built:
    """What `build` wrote and how long it took."""

    n: int
    counts: dict[str, int]
    seconds: float
    vector_seconds: float


def split(n: int) -> dict[str, int]:
    """How many of `n` memories each source holds."""
    counts = {k: int(n * v) for k, v in SHARES.items()}
    counts["store"] += n - sum(counts.values())
    return counts


def build(
    path: Path, n: int, gen: Generator, *, pool: npt.NDArray[np.float32] | None = None, model_id: str = ""
) -> Built:
    """Write `n` memories over the six sources into a fresh SQLite store at `path` (`fill`)."""
    store = MemoryStore.open(path, mode="lexical")
    try:
        return fill(store, n, gen, pool=pool, model_id=model_id)
    finally:
        store.close()


def fill(
    store: MemoryStore,
    n: int,
    gen: Generator,
    *,
    pool: npt.NDArray[np.float32] | None = None,
    model_id: str = "",
) -> Built:
    """Write `n` memories over the six sources into an empty store on any engine (no embedder).

    With `pool` (real embeddings of some corpus texts), every entry, fact and knowledge row
    gets a vector: a pool vector plus noise, renormalised (see `recycled_vectors`). Only the
    writes are timed: each batch's texts (and vectors) are generated first, as a peer's build
    is timed on texts and vectors it is given.
    """
    counts = split(n)
    clock = _WriteClock()
    writers = Writers.for_store(store)
    _entries(store, gen, counts["store"], _ENTRY_TYPES, "m", clock=clock)
    _entries(store, gen, counts["persona"], _PERSONA_TYPES, "p", clock=clock)
    _facts(writers, gen, counts["facts"], clock)
    _knowledge(store, gen, counts["knowledge"], clock)
    _neurons(writers, gen, counts["neurons"], clock)
    _graph(writers, gen, counts["graphs"], clock)
    vectors = _WriteClock()
    if pool is not None:
        _vectors_for_all(store, pool, model_id, gen.seed, vectors)
    return Built(n=n, counts=counts, seconds=clock.seconds, vector_seconds=vectors.seconds)


@attrs.define
class _WriteClock:
    """Seconds spent in the timed writes, summed."""

    seconds: float = 0.0

    def run(self, write: Callable[[], object]) -> None:
        started = time.perf_counter()
        write()
        self.seconds += time.perf_counter() - started


def _entries(
    store: MemoryStore, gen: Generator, n: int, types: tuple[str, ...], prefix: str, *, clock: _WriteClock
) -> None:
    for start in range(0, n, BATCH):
        batch = [
            NewEntry(id=f"{prefix}{i}", text=gen.memory(), kind="note", memory_type=types[i % len(types)])
            for i in range(start, min(n, start + BATCH))
        ]
        clock.run(functools.partial(store.add_entries, batch, namespace=NS))


def _facts(writers: Writers, gen: Generator, n: int, clock: _WriteClock) -> None:
    for start in range(0, n, BATCH):
        batch = [NewFact(id=f"f{i}", text=gen.memory()) for i in range(start, min(n, start + BATCH))]
        clock.run(functools.partial(writers.facts.add_facts, batch, namespace=NS))


def _knowledge(store: MemoryStore, gen: Generator, n: int, clock: _WriteClock) -> None:
    # KnowledgeWriter writes one item per transaction; at a million memories that alone would
    # take minutes, so the benchmark batches the same validated rows through insert_docs.
    table = DocTable(KNOWLEDGE_TABLE, _engine.CORPUS_KNOWLEDGE)
    for start in range(0, n, BATCH):
        rows = [
            {
                "id": f"k{i}",
                "text": gen.memory(),
                "provenance": f'["m{i}"]',
                "created_at": "2026-01-01T00:00:00+00:00",
                "metadata": "{}",
            }
            for i in range(start, min(n, start + BATCH))
        ]
        clock.run(functools.partial(insert_docs, store, NS, table, rows, replace=False))


def _neurons(writers: Writers, gen: Generator, n: int, clock: _WriteClock) -> None:
    neurons = [
        NewNeuron(text=gen.memory(), triggers=[" ".join(gen.words(2)), " ".join(gen.words(2))], id=f"n{i}")
        for i in range(n)
    ]
    for start in range(0, n, BATCH):
        clock.run(
            functools.partial(writers.neurons.add_neurons, neurons[start : start + BATCH], namespace=NS)
        )


def _graph(writers: Writers, gen: Generator, n: int, clock: _WriteClock) -> None:
    nodes = [(gen.name(), gen.memory()) for _ in range(n)]
    edges = [(i, j) for i in range(1, n) for j in {i - 1, gen.below(i)}]

    def write() -> None:  # one transaction, as a bulk load writes a graph (`GraphWriter.batch`)
        with writers.graphs.batch() as graph:
            for i, (name, description) in enumerate(nodes):
                graph.add_node(name, namespace=NS, id=f"g{i}", description=description)
            for i, j in edges:
                graph.add_edge(f"g{i}", "related_to", f"g{j}", namespace=NS)

    clock.run(write)


def recycled_vectors(pool: npt.NDArray[np.float32], n: int, seed: int) -> npt.NDArray[np.float32]:
    """`n` unit vectors near real embeddings: a random pool vector plus Gaussian noise.

    Embedding every synthetic memory would take longer than the whole benchmark on 2 cores;
    exact cosine search costs the same whatever the values, so the stored vectors are real
    embeddings recycled. Each query is embedded for real.
    """
    rng = np.random.default_rng(seed)
    picked = pool[rng.integers(0, len(pool), n)]
    noisy = picked + rng.standard_normal(picked.shape).astype(np.float32) * 0.02
    unit: npt.NDArray[np.float32] = (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)
    return unit


def _vectors_for_all(
    store: MemoryStore, pool: npt.NDArray[np.float32], model_id: str, seed: int, clock: _WriteClock
) -> None:
    # Through the engine protocol, so any engine's store gets the same vectors: the rows without
    # one are the corpus's rows (the store holds the one namespace NS), in rowid order.
    with store.db.read() as conn:
        ns_id = conn.namespace_id(NS)
        assert ns_id is not None  # noqa: S101 - the rows were written
        rowids = {corpus: conn.unembedded(corpus, model_id, pool.shape[1]) for corpus in _engine.CORPORA}
    for corpus, ids in rowids.items():
        for start in range(0, len(ids), BATCH):
            part = ids[start : start + BATCH]
            vecs = recycled_vectors(pool, len(part), seed + corpus * 1_000_003 + start)
            clock.run(functools.partial(_store_vectors, store, Slot(ns_id, corpus), part, vecs, model_id))


def _store_vectors(
    store: MemoryStore, slot: Slot, rowids: Sequence[int], vectors: npt.NDArray[np.float32], model_id: str
) -> None:
    with store.db.write() as conn:
        conn.store_vectors(slot, rowids, vectors, model_id)


def timed(fn: Callable[[], object]) -> float:
    """Seconds `fn()` took."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started
