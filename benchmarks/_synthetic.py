"""A synthetic corpus for the latency benchmarks: Zipf-distributed words over the six sources.

Words are the alphabetic, non-stop-word entries of the embedding model's WordPiece vocabulary
(real English words, one word piece each). Word frequencies follow a Zipf-Mandelbrot law
p(r) ~ 1 / (r + q)^s over a shuffled ranking: the stop-word head of natural text is what the
analyser drops, so the content words a query sees start at rank q = the number of stop words.

Memories are 10-40 words, spread over the sources by `SHARES` (store entries, persona
entries, facts, knowledge, neurons with trigger phrases, graph nodes with edges). The first
store entries are real ones (`real_sets`, `real_pool`: the LoCoMo dev conversations' turns when
they are beside the repository, else the facts of our own task-style and personal sets), stored
with their own MiniLM embeddings; every other row gets the real embedding of a synthetic memory
(`pool_texts`) plus noise (`recycled_vectors`), in words the real ones never use. Tasks are the
real questions, each answerable from a stored memory (the gate can open and memories be
selected, as on most of a user's turns), mixed with `TRIVIAL_SHARE` trivial tasks (which must
select nothing).
"""

from __future__ import annotations

import functools
import json
import random
import time
from importlib.resources import files
from pathlib import Path
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

NS = Namespace(tenant_id="bench", project_id="synthetic")
DATA: Final = Path(__file__).parent / "data"
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


@functools.cache
def vocabulary() -> list[str]:
    """Real English content words: the model vocabulary's whole alphabetic words, stop words
    removed, and none that `real_sets` use: the synthetic memories are about other things than
    the real ones (a large store holds memories of many subjects), so a real task's words keep
    the standing they have among real memories instead of occurring in a thousand word lists."""
    text = (files("sources") / "data" / "minilm-vocab.txt").read_text(encoding="utf-8")
    words = {w for w in text.split() if w.isascii() and w.isalpha() and 3 <= len(w) <= 12}
    _source, facts, questions = real_sets()
    real = {t for line in (*facts, *questions) for t in terms(line)}
    # Keep only words the analyser indexes (a few stem to nothing informative).
    return sorted(w for w in words if w not in STOP_WORDS and (found := terms(w)) and not set(found) & real)


@attrs.define(eq=False)
class Generator:
    """Draws memories and tasks from one seeded Zipf-Mandelbrot vocabulary."""

    seed: int = 0
    _rng: random.Random = attrs.field(init=False)
    _words: list[str] = attrs.field(init=False)
    _cum: list[float] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        words = list(vocabulary())  # a copy: it is shuffled
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

    def task(self, memory: str) -> str:
        """3-8 distinct content words of a memory."""
        distinct = list(dict.fromkeys(memory.split()))
        k = min(len(distinct), self._rng.randint(3, 8))
        return " ".join(self._rng.sample(distinct, k))

    def tasks(self, n: int, trivial: Sequence[str], answerable: Sequence[str]) -> list[tuple[str, bool]]:
        """`n` tasks (text, is_trivial): `answerable` ones (a stored memory serves each) mixed
        with trivial ones."""
        if not answerable:
            msg = "no answerable tasks to draw from"
            raise ValueError(msg)
        out = []
        for _ in range(n):
            if self._rng.random() < TRIVIAL_SHARE:
                out.append((self._rng.choice(list(trivial)), True))
            else:
                out.append((self._rng.choice(answerable), False))
        return out


@attrs.frozen
class Pool:
    """What a corpus holds for real: memories stored with their own embeddings, the tasks they
    answer, and the real embeddings recycled for every other row."""

    stored: Sequence[str]
    """The first store entries' texts."""
    vectors: npt.NDArray[np.float32]
    """Unit vectors: `stored`'s embeddings, row for row, then those recycled for other rows."""
    tasks: Sequence[str]
    """Tasks each answerable from one of `stored`."""
    groups: tuple[tuple[int, int], ...] = ()
    """(memories, tasks) of each group in order (a conversation, a set): a group's tasks are
    answerable from its own memories. Empty: one group."""

    def at(self, capacity: int) -> Pool:
        """The leading whole groups whose memories fit in `capacity` entries (a small corpus holds
        fewer real memories, and is asked only the tasks they answer)."""
        groups = self.groups or ((len(self.stored), len(self.tasks)),)
        kept = fitting(groups, capacity)
        memories, tasks = sum(m for m, _ in groups[:kept]), sum(t for _, t in groups[:kept])
        vectors = np.concatenate([self.vectors[:memories], self.vectors[len(self.stored) :]])
        return Pool(
            stored=self.stored[:memories], vectors=vectors, tasks=self.tasks[:tasks], groups=groups[:kept]
        )


REAL_SETS: Final = ("agent_dev", "agent_test", "personal_dev", "personal_test")
"""Our own sets (benchmarks/data) whose facts a corpus stores and whose questions it is asked
when the LoCoMo dev conversations are absent."""
LOCOMO_SOURCE: Final = "the LoCoMo dev conversations (../shared; their answerable questions the tasks)"
OWN_SOURCE: Final = "our own task-style and personal sets (benchmarks/data; their questions the tasks)"


@functools.cache
def real_groups() -> tuple[str, tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]]:
    """What a corpus holds for real: (where from, groups of (memories, questions)), natural
    text, each question answerable from its group's memories. The LoCoMo dev conversations when
    they are beside the repository (five groups: 2,760 turns, 762 answerable questions; the gate
    opens on them as on a user's long memory); else our own sets (four groups: 254 facts, 236
    questions)."""
    if _locomo.LOCOMO.exists():
        groups = tuple(
            (tuple(e.text for e in c.entries()), tuple(q.text for q in c.questions())) for c in _locomo.load()
        )
        return LOCOMO_SOURCE, groups
    out = []
    for name in REAL_SETS:
        data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
        out.append((tuple(data["facts"].values()), tuple(q for q, _gold in data["questions"])))
    return OWN_SOURCE, tuple(out)


def fitting(groups: Sequence[tuple[int, int]], capacity: int) -> int:
    """How many leading groups of (memories, tasks) fit in `capacity` entries; ValueError when
    none does."""
    used = kept = 0
    for memories, _tasks in groups:
        if used + memories > capacity:
            break
        used, kept = used + memories, kept + 1
    if kept == 0:
        msg = f"no group of real memories fits in {capacity} entries"
        raise ValueError(msg)
    return kept


def real_at(capacity: int) -> tuple[list[str], list[str]]:
    """The real memories and questions a corpus of `capacity` store entries holds (the groups
    `Pool.at` keeps), without their embeddings."""
    _source, groups = real_groups()
    kept = groups[: fitting([(len(g), len(qs)) for g, qs in groups], capacity)]
    return [m for g, _ in kept for m in g], [q for _, qs in kept for q in qs]


def real_sets() -> tuple[str, list[str], list[str]]:
    """`real_groups` flat: (where from, memories, questions)."""
    source, groups = real_groups()
    return source, [m for g, _ in groups for m in g], [q for _, qs in groups for q in qs]


def real_pool(
    embed: Callable[[list[str]], npt.NDArray[np.float32]], recycled: npt.NDArray[np.float32]
) -> Pool:
    """The `real_sets` facts with their embeddings (`embed`), then `recycled` (real embeddings
    of other texts, `pool_texts`), and the sets' questions."""
    _source, groups = real_groups()
    facts = [m for g, _ in groups for m in g]
    own = np.asarray(embed(facts), dtype=np.float32)
    return Pool(
        stored=facts,
        vectors=np.concatenate([own, recycled.astype(np.float32)]),
        tasks=[q for _, qs in groups for q in qs],
        groups=tuple((len(g), len(qs)) for g, qs in groups),
    )


def pool_texts(seed: int, size: int) -> list[str]:
    """The pool's texts: the first `size` memories of the generator seeded `seed` (every harness
    embeds these as its pool)."""
    gen = Generator(seed=seed)
    return [gen.memory() for _ in range(size)]


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
    path: Path,
    n: int,
    gen: Generator,
    *,
    texts: Sequence[str],
    pool: npt.NDArray[np.float32] | None = None,
    model_id: str = "",
) -> Built:
    """Write `n` memories over the six sources into a fresh SQLite store at `path` (`fill`)."""
    store = MemoryStore.open(path, mode="lexical")
    try:
        return fill(store, n, gen, texts=texts, pool=pool, model_id=model_id)
    finally:
        store.close()


def fill(
    store: MemoryStore,
    n: int,
    gen: Generator,
    *,
    texts: Sequence[str],
    pool: npt.NDArray[np.float32] | None = None,
    model_id: str = "",
) -> Built:
    """Write `n` memories over the six sources into an empty store on any engine (no embedder).

    The first store entries are `texts` (a `Pool`'s `stored`: what the tasks are answerable
    from), the others generated. With `pool` (real embeddings: first those of
    `texts`, row for row, then those of other texts), those entries get their own embeddings and
    every other entry, fact and knowledge row one of the others plus noise, renormalised (see
    `recycled_vectors`; the whole pool when it holds no others). Only the writes are timed:
    each batch's texts (and vectors) are generated first, as a peer's build is timed on texts
    and vectors it is given.
    """
    if pool is not None and len(pool) < len(texts):
        msg = f"{len(pool)} pool vectors for {len(texts)} pool texts"
        raise ValueError(msg)
    counts = split(n)
    if len(texts) > counts["store"]:
        msg = f"{len(texts)} pool texts for {counts['store']} store entries"
        raise ValueError(msg)
    clock = _WriteClock()
    writers = Writers.for_store(store)
    _entries(store, gen, counts["store"], _ENTRY_TYPES, "m", clock=clock, first=texts)
    _entries(store, gen, counts["persona"], _PERSONA_TYPES, "p", clock=clock)
    _facts(writers, gen, counts["facts"], clock)
    _knowledge(store, gen, counts["knowledge"], clock)
    _neurons(writers, gen, counts["neurons"], clock)
    _graph(writers, gen, counts["graphs"], clock)
    vectors = _WriteClock()
    if pool is not None:
        _vectors_for_all(store, pool, own=len(texts), model_id=model_id, seed=gen.seed, clock=vectors)
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
    store: MemoryStore,
    gen: Generator,
    n: int,
    types: tuple[str, ...],
    prefix: str,
    *,
    clock: _WriteClock,
    first: Sequence[str] = (),
) -> None:
    """`n` entries, the first of them `first`'s texts, the others generated."""
    for start in range(0, n, BATCH):
        batch = [
            NewEntry(
                id=f"{prefix}{i}",
                text=first[i] if i < len(first) else gen.memory(),
                kind="note",
                memory_type=types[i % len(types)],
            )
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
    store: MemoryStore,
    pool: npt.NDArray[np.float32],
    *,
    own: int,
    model_id: str,
    seed: int,
    clock: _WriteClock,
) -> None:
    # Through the engine protocol, so any engine's store gets the same vectors: the rows without
    # one are the corpus's rows (the store holds the one namespace NS), in rowid order, so the
    # first `own` entries are the pool's texts and take their own embeddings, the first rows of
    # the pool; the other rows recycle the rest of it.
    with store.db.read() as conn:
        ns_id = conn.namespace_id(NS)
        assert ns_id is not None  # noqa: S101 - the rows were written
        rowids = {corpus: conn.unembedded(corpus, model_id, pool.shape[1]) for corpus in _engine.CORPORA}
    recycled = pool[own:] if len(pool) > own else pool
    for corpus, ids in rowids.items():
        first = own if corpus == _engine.CORPUS_ENTRIES else 0
        for start in range(0, len(ids), BATCH):
            part = ids[start : start + BATCH]
            vecs = recycled_vectors(recycled, len(part), seed + corpus * 1_000_003 + start)
            mine = max(0, min(first - start, len(part)))  # the pool texts among this batch
            vecs[:mine] = pool[start : start + mine]
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
