"""Relevance quality on the LoCoMo dev conversations: the broker in each mode against the
baselines a user would pick instead (bm25s top-k, exact dense top-k with no floor, and the
peers of the latency comparison: a Chroma collection and LangGraph's `InMemoryStore`).

The broker runs the real selector over every default source (loaded by
`load_dev_sources.load_sources`, turns included), budget 40. The baselines index the same
texts per tenant (turns, observation facts, session summaries; each maps to its dia_ids as
`load_dev_sources.evidence_ids` does) and always inject their top 40 (BM25: matching ones).
The dense ones use the vectors our store computed (MiniLM) and embed each question with it:
`dense-top40` is exact cosine in numpy, `chromadb-top40` Chroma's HNSW (one persistent
collection per tenant), `langgraph-top40` LangGraph's search (one namespace per tenant).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import attrs
import numpy as np

from broker import EstimatingTokenCounter, MemorySelector, open_selector
from sources import MemoryStore, default_sources
from sources.storage import _vectors

from . import _locomo, _peer_systems
from .load_dev_sources import evidence_ids, load_sources

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from sources.embedding._embedder import MiniLMEmbedder

BUDGET: Final = 40
HIT_AT: Final = (1, 2, 3, 5, 8, 10, 15, 20, 30, 40)
QUALITY_DEADLINE: Final = 2.0
"""Seconds per turn here: quality, not latency, is measured (latency is in latency.json); the
circuit breakers are off too, so a slow turn never skips a source on the next ones."""

Retrieved = list[tuple[set[str], str]]  # per injected memory: (dia_ids it stands for, text)


@attrs.frozen(kw_only=True)
class Doc:
    evidence: frozenset[str]
    text: str


def docs(store: MemoryStore, conv: _locomo.Conversation) -> tuple[list[Doc], list[tuple[int, int]]]:
    """The tenant's texts as baseline documents, with (corpus, rowid) of each for its vector."""
    out: list[Doc] = []
    keys: list[tuple[int, int]] = []
    with store.db.read() as conn:
        ns = conn.execute(
            "SELECT ns_id FROM namespaces WHERE tenant_id = ? AND project_id = ?",
            (conv.namespace.tenant_id, conv.namespace.project_id),
        ).fetchone()[0]
        for rowid, id_, text in conn.execute("SELECT rowid, id, text FROM entries WHERE ns_id = ?", (ns,)):
            out.append(Doc(evidence=frozenset({id_}), text=text))
            keys.append((0, rowid))
        for rowid, text, meta in conn.execute(
            "SELECT rowid, text, metadata FROM facts WHERE ns_id = ?", (ns,)
        ):
            out.append(Doc(evidence=frozenset(json.loads(meta or "{}").get("dia_ids", [])), text=text))
            keys.append((1, rowid))
        for rowid, text, prov in conn.execute(
            "SELECT rowid, text, provenance FROM knowledge WHERE ns_id = ?", (ns,)
        ):
            out.append(Doc(evidence=frozenset(json.loads(prov)), text=text))
            keys.append((2, rowid))
    return out, keys


def bm25_retriever(store: MemoryStore, convs: Sequence[_locomo.Conversation]) -> Callable[..., Any]:
    """bm25s per tenant, as in the peers benchmark (`_peer_systems.bm25s_index`)."""
    index: dict[str, tuple[Any, list[Doc]]] = {}
    for c in convs:
        ds, _ = docs(store, c)
        index[c.sample_id] = (_peer_systems.bm25s_index([d.text for d in ds]), ds)

    async def retrieve(task: str, conv: _locomo.Conversation) -> Retrieved:
        model, ds = index[conv.sample_id]
        top = _peer_systems.bm25s_top(model, task, min(BUDGET, len(ds)))
        return [(set(ds[i].evidence), ds[i].text) for i, _ in top]

    return retrieve


def doc_vectors(
    store: MemoryStore, conv: _locomo.Conversation, embedder: MiniLMEmbedder
) -> tuple[list[Doc], np.ndarray]:
    """The tenant's baseline documents and the vectors our store holds for them."""
    ds, keys = docs(store, conv)
    with store.db.read() as conn:
        blobs = [
            conn.execute(
                "SELECT vec FROM vectors WHERE corpus = ? AND src_rowid = ? AND model_id = ?",
                (corpus, rowid, embedder.model_id),
            ).fetchone()[0]
            for corpus, rowid in keys
        ]
    return ds, _vectors.from_blobs(blobs, embedder.dim)


class _QueryVectors:
    """Each question embedded once, whichever retriever or tenant asks."""

    def __init__(self, embedder: MiniLMEmbedder) -> None:
        self._embedder = embedder
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, task: str) -> np.ndarray:
        if task not in self._cache:
            self._cache[task] = self._embedder.embed([task])[0]
        return self._cache[task]


def dense_retriever(
    store: MemoryStore, convs: Sequence[_locomo.Conversation], embedder: MiniLMEmbedder
) -> Callable[..., Any]:
    index = {c.sample_id: doc_vectors(store, c, embedder) for c in convs}
    query = _QueryVectors(embedder)

    async def retrieve(task: str, conv: _locomo.Conversation) -> Retrieved:
        ds, matrix = index[conv.sample_id]
        top = np.argsort(-(matrix @ query(task)))[:BUDGET]
        return [(set(ds[int(i)].evidence), ds[int(i)].text) for i in top]

    return retrieve


def chroma_retriever(
    store: MemoryStore, convs: Sequence[_locomo.Conversation], embedder: MiniLMEmbedder, path: Path
) -> Callable[..., Any]:
    """One cosine HNSW collection per tenant in a persistent client; vectors given, question embedded."""
    client = _peer_systems.chroma_client(path)
    index: dict[str, tuple[Any, list[Doc]]] = {}
    for c in convs:
        ds, matrix = doc_vectors(store, c, embedder)
        col = _peer_systems.chroma_collection(client, f"locomo-{c.sample_id}", matrix, [d.text for d in ds])
        index[c.sample_id] = (col, ds)
    query = _QueryVectors(embedder)

    async def retrieve(task: str, conv: _locomo.Conversation) -> Retrieved:
        col, ds = index[conv.sample_id]
        got = col.query(query_embeddings=query(task)[None, :], n_results=min(BUDGET, len(ds)), include=[])
        return [(set(ds[int(i)].evidence), ds[int(i)].text) for i in got["ids"][0]]

    return retrieve


def langgraph_retriever(
    store: MemoryStore, convs: Sequence[_locomo.Conversation], embedder: MiniLMEmbedder
) -> Callable[..., Any]:
    """LangGraph's `InMemoryStore`, one namespace per tenant; it embeds each question with our MiniLM."""
    indexed = {c.sample_id: doc_vectors(store, c, embedder) for c in convs}
    known = {d.text: v for ds, m in indexed.values() for d, v in zip(ds, m.tolist(), strict=True)}
    lg = _peer_systems.langgraph_store(known, embedder.embed, embedder.dim)
    for sample_id, (ds, _) in indexed.items():
        for i, d in enumerate(ds):
            lg.put(("locomo", sample_id), str(i), {"text": d.text})

    async def retrieve(task: str, conv: _locomo.Conversation) -> Retrieved:
        ds = indexed[conv.sample_id][0]
        got = lg.search(("locomo", conv.sample_id), query=task, limit=BUDGET)
        return [(set(ds[int(item.key)].evidence), ds[int(item.key)].text) for item in got]

    return retrieve


@attrs.define
class Tally:
    """Counts over one kind of turn."""

    turns: int = 0
    abstained: int = 0
    hits: int = 0
    evidence: int = 0
    evidence_found: int = 0
    injected: int = 0
    irrelevant: int = 0
    tokens: int = 0
    first_gold: list[int] = attrs.field(factory=list)
    """Per turn, the position of the first injected memory that covers evidence (-1: none)."""

    def add(self, got: Retrieved, gold: frozenset[str], counter: EstimatingTokenCounter) -> None:
        self.turns += 1
        self.abstained += not got
        found = set().union(*(e for e, _ in got)) if got else set()
        self.hits += bool(found & gold)
        self.evidence += len(gold)
        self.evidence_found += len(found & gold)
        self.injected += len(got)
        self.irrelevant += sum(not (e & gold) for e, _ in got)
        self.tokens += sum(counter.count(t) for _, t in got)
        self.first_gold.append(next((i for i, (e, _) in enumerate(got) if e & gold), -1))

    def figures(self) -> dict[str, float]:
        n = max(self.turns, 1)
        return {
            "turns": self.turns,
            "abstention": round(self.abstained / n, 4),
            "hit_rate": round(self.hits / n, 4),
            "evidence_recall": round(self.evidence_found / max(self.evidence, 1), 4),
            "irrelevant_memory_rate": round(self.irrelevant / max(self.injected, 1), 4),
            "mean_injected": round(self.injected / n, 2),
            "tokens_per_turn": round(self.tokens / n, 1),
            # Hit rate had only the first k injected memories been kept: recall against memories injected.
            "hit_at": {k: round(sum(0 <= f < k for f in self.first_gold) / n, 4) for k in HIT_AT},
        }


async def evaluate(
    retrieve: Callable[[str, _locomo.Conversation], Awaitable[Retrieved]],
    convs: Sequence[_locomo.Conversation],
    *,
    max_questions: int | None,
) -> dict[str, Any]:
    """Every kind of turn through one retriever; the figures per kind and the headline ones."""
    counter = EstimatingTokenCounter()
    kinds = {k: Tally() for k in ("answerable", "adversarial", "trivial", "foreign")}
    started = time.perf_counter()
    for owner, foreign in _locomo.foreign_pairs(list(convs)):
        for q in owner.questions()[:max_questions]:
            kinds["answerable"].add(await retrieve(q.text, owner), q.evidence, counter)
            kinds["foreign"].add(await retrieve(q.text, foreign), frozenset(), counter)
        for q in owner.questions((5,))[:max_questions]:
            kinds["adversarial"].add(await retrieve(q.text, owner), q.evidence, counter)
        for task in _locomo.trivial_tasks():
            kinds["trivial"].add(await retrieve(task, owner), frozenset(), counter)
    elapsed = time.perf_counter() - started
    fig = {k: t.figures() for k, t in kinds.items()}
    pooled = Tally()
    for k in ("answerable", "trivial", "foreign"):
        for f in attrs.fields(Tally):
            setattr(pooled, f.name, getattr(pooled, f.name) + getattr(kinds[k], f.name))
    answerable = fig["answerable"]
    return {
        "evidence_recall": fig["answerable"]["evidence_recall"],
        "hit_rate": fig["answerable"]["hit_rate"],
        "false_abstention": fig["answerable"]["abstention"],
        "trivial_abstention": fig["trivial"]["abstention"],
        "foreign_abstention": fig["foreign"]["abstention"],
        "irrelevant_memory_rate": pooled.figures()["irrelevant_memory_rate"],
        "irrelevant_memory_rate_answerable": fig["answerable"]["irrelevant_memory_rate"],
        "tokens_per_turn": pooled.figures()["tokens_per_turn"],
        "tokens_per_answerable_turn": answerable["tokens_per_turn"],
        "injected_per_answerable_turn": answerable["mean_injected"],
        "evidence_share_of_injected": (
            round(1.0 - answerable["irrelevant_memory_rate"], 4) if answerable["mean_injected"] else None
        ),
        "hit_at": answerable["hit_at"],
        "category_5": fig["adversarial"],
        "by_kind": fig,
        "seconds": round(elapsed, 1),
    }


async def run(
    *,
    modes: Sequence[str],
    embedder: MiniLMEmbedder | None,
    max_questions: int | None,
    conversations: int | None,
    baselines: Sequence[str],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Build the dev store (real embeddings when `embedder`), then evaluate every system."""
    convs = _locomo.load()[:conversations]
    out: dict[str, Any] = {
        "budget": BUDGET,
        "conversations": [c.sample_id for c in convs],
        "max_questions_per_conversation": max_questions,
        "systems": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        store = MemoryStore.open(
            Path(tmp) / "dev.db", embedder=embedder, mode="hybrid" if embedder else "lexical"
        )
        try:
            out["counts"] = await anyio.to_thread.run_sync(lambda: load_sources(store, convs, turns=True))
            out["load_seconds"] = round(time.perf_counter() - started, 1)
            log(f"quality: dev store loaded in {out['load_seconds']} s")
            for mode in modes:
                async with open_selector(
                    default_sources(store), deadline=QUALITY_DEADLINE, mode=mode, breaker_threshold=10**9
                ) as sel:

                    async def broker(
                        task: str, conv: _locomo.Conversation, sel: MemorySelector = sel
                    ) -> Retrieved:
                        res = await sel.select_for_task(task, namespace=conv.namespace, budget=BUDGET)
                        return [(evidence_ids(b), b.text) for b in res.blocks]

                    out["systems"][f"broker-{mode}"] = await evaluate(
                        broker, convs, max_questions=max_questions
                    )
                log(f"quality: broker-{mode} done")
            if "bm25" in baselines:
                out["systems"]["bm25-top40"] = await evaluate(
                    bm25_retriever(store, convs), convs, max_questions=max_questions
                )
                log("quality: bm25 done")
            if "dense" in baselines and embedder is not None:
                out["systems"]["dense-top40"] = await evaluate(
                    dense_retriever(store, convs, embedder), convs, max_questions=max_questions
                )
                log("quality: dense done")
            if "chromadb" in baselines and embedder is not None:
                out["systems"]["chromadb-top40"] = await evaluate(
                    chroma_retriever(store, convs, embedder, Path(tmp) / "chroma"),
                    convs,
                    max_questions=max_questions,
                )
                log("quality: chromadb done")
            if "langgraph" in baselines and embedder is not None:
                out["systems"]["langgraph-top40"] = await evaluate(
                    langgraph_retriever(store, convs, embedder), convs, max_questions=max_questions
                )
                log("quality: langgraph done")
        finally:
            store.close()
    return out
