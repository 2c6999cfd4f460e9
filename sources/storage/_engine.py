"""The storage engine boundary: what every corpus asks of the database, and nothing more.

Path: `sources/storage/_engine.py` (core: the engine, a read, a write, namespaces, term statistics,
lexical candidates, vectors) and `sources/storage/_engine_corpora.py` (each corpus's rows: entries,
documents, neurons, graph, memorules, tasks). Read them on the `engine` branch with
`git -C /work/wt/engine show engine:sources/storage/_engine.py`. After 19:25 UTC on 2026-11-30 they
change only by addition; a change that is not an addition is noted at the top of
`docs/engine.md`. `sources.storage._sqlite.SqliteEngine` implements them (the default); a PostgreSQL
engine implements the same protocols.

What the project owns, so that every engine gives the same scores (to 1e-6):
- the **terms** of a text: `sources.storage._analysis.terms` (the caller analyses, the engine stores
  and returns the terms it is given, in order, and never tokenises text itself);
- the **term statistics** of a namespace (`TermStats`): over every indexed document of every
  corpus of the namespace, `n_docs`, `total_len` (sum of the documents' term counts) and per
  term `df` (documents whose terms contain it at least once);
- the **lexical rank** of a candidate (`bm25_rank` below: SQLite FTS5's `bm25()` formula on
  those statistics), the order of candidates (rank ascending, then rowid ascending), and
  which documents are candidates (those holding at least one of the query's terms);
- ids (`ns_id`, rowids, vector ids: opaque positive integers the engine assigns), text,
  JSON columns (stored and returned as the exact strings given) and timestamps (ISO-8601
  strings given by the caller, returned unchanged).

Engine-neutral rules every implementation keeps:
- Every read and write names a namespace (`ns_id`) and never returns another's rows; a rowid
  found in one namespace is only ever read back together with that namespace.
- A `Reader` is one consistent snapshot for its whole life (SQLite: a read transaction on a
  pooled connection; PostgreSQL: REPEATABLE READ, READ ONLY). A `Writer` is one transaction:
  everything done through it (a row, its index terms, its vector, its memorule state and
  audit event) commits together or not at all; a process killed inside it leaves nothing.
- Engine errors are raised as `sources.StoreError` with a one-line message naming the store
  (`Engine.location`), never as a driver exception (a stopped read may raise any Exception:
  the caller's cancellation wins over it). `BrokerClosedError` after `close()`.
- Blocking, thread-safe: callers run engine calls in worker threads (`sources.storage._threads`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final, Protocol

from broker import Namespace

from ._engine_values import (
    BM25_B,
    BM25_K1,
    BM25_MIN_IDF,
    KindCount,
    NamespaceVersion,
    ReadStop,
    RecordCount,
    Slot,
    Stop,
    TermStats,
    TextChange,
    Tombstone,
    VectorCounts,
    VectorRow,
    bm25_rank,
)
from ._runs import LexicalHit

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt

    from ._engine_corpora import (
        DocReads,
        DocWrites,
        EntryReads,
        EntryWrites,
        GraphReads,
        GraphWrites,
        MemoruleReads,
        MemoruleWrites,
        NeuronReads,
        NeuronWrites,
        TaskReads,
        TaskWrites,
    )

CORPUS_ENTRIES: Final = 0
"""Entries: notes, neurons, memorules (the `entries` rows)."""
CORPUS_FACTS: Final = 1
"""Abstraction facts (the `facts` document table)."""
CORPUS_KNOWLEDGE: Final = 2
"""Consolidated knowledge (the `knowledge` document table)."""
CORPORA: Final = (CORPUS_ENTRIES, CORPUS_FACTS, CORPUS_KNOWLEDGE)
"""The indexed corpora, in the order every per-corpus result is given."""

# -- the engine, a read and a write ----------------------------------------------------------


class Engine(Protocol):
    """One store's database: a pool of snapshot readers and one writer at a time.

    Thread-safe. `read` may be entered from many threads at once; `write` serialises writers
    of this process (and the engine serialises them across processes as it must: SQLite's
    `BEGIN IMMEDIATE`; PostgreSQL's row locks and the advisory lock of `Writer`).
    """

    @property
    def location(self) -> str:
        """Where the store is, for messages: a path, or a URL without its password."""

    @property
    def closed(self) -> bool:
        """True once `close` was called."""

    @property
    def vector_dir(self) -> Path | None:
        """A local directory to keep derived vector files (HNSW graphs) in, None: keep none."""

    @property
    def read_threads(self) -> int:
        """Worker threads the sources of one store should read in at once: their reads overlap
        only where the engine's work releases the GIL (a server round trip does; SQLite's
        in-process work mostly holds it through the Python that scores the rows)."""

    def read(self, stop: Stop | None = None) -> AbstractContextManager[Reader]:
        """One snapshot read on a connection of its own, returned to the pool after.

        With `stop`: when it is tripped, the running statement and every later statement of
        this read fail at once (within about a millisecond of engine work), raising an
        Exception; the connection comes back clean. `stop.tripped` already true: the first
        statement fails. A trip after the read ended affects nothing.
        """

    def write(self) -> AbstractContextManager[Writer]:
        """One write transaction, committed when the block returns, else rolled back; the
        error raised is the one that failed it, never a failure of the rollback."""

    def close(self) -> None:
        """Close every connection; idempotent; later use raises BrokerClosedError."""

    def change_stamp(self, *, wait: bool = False) -> int | None:
        """A number that changes whenever anything is committed to the store, by any connection
        of any process (added 19:25 UTC). Without `wait` it never blocks (it runs in the event
        loop): None when it cannot be read at once; with `wait` (a worker thread) it may wait for
        its own connection, never for a lock of the data. None: unknown (an engine that cannot
        tell always answers None, and callers read the namespaces' generations instead)."""

    def refresh_statistics(self) -> None:
        """Bring the engine's query-planner statistics up to date after a bulk load (PostgreSQL:
        ANALYZE of the store's tables; SQLite: nothing, its plans do not use statistics)."""

    def size_bytes(self) -> int:
        """The store's bytes on disk (SQLite: the file and its WAL; PostgreSQL: the schema)."""

    def schema_version(self) -> int:
        """The engine's schema version (its own migrations' numbering)."""


class Reader(Protocol):
    """One consistent snapshot of the store (see the module docstring)."""

    # -- namespaces

    def namespace_id(self, namespace: Namespace) -> int | None:
        """The namespace's id, or None if nothing was ever written to it (a read never creates)."""

    def namespace_ids(self) -> tuple[int, ...]:
        """Every namespace's id, ascending."""

    def versions(self, namespace: Namespace) -> tuple[NamespaceVersion, ...]:
        """The namespace's (id, generation): one value, or () while it does not exist."""

    def tenant_versions(self, tenant_id: str) -> tuple[NamespaceVersion, ...]:
        """(id, generation) of every namespace of the tenant, by id (a new project adds one)."""

    def generation(self, ns_id: int) -> int:
        """The namespace's write generation: it changes (never back) with every committed
        write to any of the namespace's rows, from any process; 0 for an unknown id."""

    # -- the lexical index (every corpus of a namespace shares one)

    def term_stats(self, ns_id: int, terms: Sequence[str]) -> TermStats:
        """The namespace's `TermStats` for `terms` (see `TermStats`); an unknown id: zeros."""

    def lexical_candidates(
        self, ns_id: int, terms: Sequence[str], *, corpus: int, limit: int
    ) -> list[LexicalHit]:
        """The `limit` best documents of one corpus holding any of `terms`.

        Each hit is (rowid in its corpus, `bm25_rank` on the namespace's statistics, the
        document's indexed terms in their indexed order); ordered by rank, then rowid. No
        term, or no match: []. The terms are matched exactly (no stemming, no prefix, no
        syntax: a term is data).
        """

    def indexed_terms(self, ns_id: int, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], list[str]]:
        """The indexed terms of some (corpus, rowid) documents of the namespace; keys not
        indexed there are absent."""

    def indexed_documents(self, ns_id: int, *, chunk: int) -> Iterator[list[tuple[tuple[int, int], str]]]:
        """Every indexed document of the namespace (added 19:10 UTC), in lists of at most `chunk`:
        ((corpus, rowid), its indexed terms joined by single spaces). For in-memory indexes."""

    def text_log_bounds(self) -> tuple[int, int]:
        """(oldest kept, newest) change id of the lexical index's log over the store (added
        19:10 UTC); (1, 0) while it is empty. Every `index_document` and effective
        `unindex_document` appends one change, in its transaction, ids in commit order, never
        reused; the engine may forget the oldest, keeping at least the last 100,000."""

    def text_changes(self, ns_id: int, after: int, *, limit: int | None = None) -> list[TextChange]:
        """The namespace's index changes with an id above `after`, by id, at most `limit` (None:
        all) (added 19:10 UTC; `limit` 19:25 UTC)."""

    # -- vectors (the in-memory matrices above the engine read these)

    def vector_rows(self, slot: Slot, after: int) -> list[VectorRow]:
        """The slot's vectors with an id above `after`, by id, of every model.

        Ids are assigned in commit order within a slot: once a reader has seen id N, no
        later commit adds a vector of that slot with an id <= N (PostgreSQL: allocate ids
        under the namespace's write lock). Ids are never reused.
        """

    def vector_tombstones(self, slot: Slot, after: int) -> list[Tombstone]:
        """The slot's deletions with a tombstone id above `after`, by tombstone id."""

    def tombstone_bounds(self) -> tuple[int, int]:
        """(oldest kept, newest) tombstone id over the store; (0, 0) when none is kept.

        Every deleted or replaced vector leaves a tombstone (ids in commit order, like
        vector ids); the engine may forget the oldest, keeping at least the last 100,000.
        """

    def stored_vectors(
        self, slot: Slot, rowids: Sequence[int], model_id: str, dim: int
    ) -> dict[int, npt.NDArray[np.float32]]:
        """The `model_id` vectors (float32, shape (dim,)) of some rows of the slot; rows
        without one are absent. Turns read cosines from `VectorIndex.cosines`' matrix in
        memory; this read of the rows is what the tests hold that matrix to."""

    # -- upkeep

    def unembedded(self, corpus: int, model_id: str, dim: int) -> list[int]:
        """Rowids of the corpus (every namespace) whose vector is missing, of another model, or
        of this model but not `dim` float32 values long (damaged), ascending."""

    def corpus_texts(self, corpus: int, rowids: Sequence[int]) -> list[tuple[int, int, str]]:
        """(rowid, ns_id, text) of some rows of a corpus (absent rows are left out)."""

    def vector_counts(self, model_id: str, dim: int, namespace: Namespace | None) -> VectorCounts:
        """Entries (corpus 0) of one namespace (None: all) by vector state for `model_id` and
        its `dim` (a vector of the model but of another length counts as stale)."""

    def kind_counts(self, namespace: Namespace | None) -> list[KindCount]:
        """Entries by namespace, kind and memory type, ordered by those four."""

    def record_counts(self, namespace: Namespace | None) -> list[RecordCount]:
        """Facts, knowledge, graph nodes and edges, tasks by namespace (none counted: left out),
        ordered by namespace and `RECORD_TABLES`."""

    # -- the corpora

    @property
    def entries(self) -> EntryReads:
        """The entries' rows (notes, neurons' and memorules' rows too)."""

    @property
    def docs(self) -> DocReads:
        """The document tables (facts, knowledge)."""

    @property
    def neurons(self) -> NeuronReads:
        """The neurons' trigger terms and rows."""

    @property
    def graph(self) -> GraphReads:
        """The entity graph's nodes, keys and edges."""

    @property
    def memorules(self) -> MemoruleReads:
        """The memorules' states and audit events."""

    @property
    def tasks(self) -> TaskReads:
        """Tasks and their conversation turns."""


class Writer(Reader, Protocol):
    """One write transaction (see `Engine.write`); reads through it see its own writes."""

    def ensure_namespace(self, namespace: Namespace) -> int:
        """The namespace's id, creating the namespace (and whatever index it needs)."""

    def index_document(self, ns_id: int, key: tuple[int, int], terms: Sequence[str]) -> None:
        """Index a (corpus, rowid) document under its analysed terms and count it in the
        namespace's statistics (n_docs + 1, total_len + len(terms), df of each distinct term
        + 1). The key must not be indexed already (unindex it first)."""

    def index_documents(self, ns_id: int, docs: Sequence[tuple[tuple[int, int], Sequence[str]]]) -> None:
        """`index_document` of each (key, terms), in order, with the statistics counted once."""

    def unindex_document(self, ns_id: int, key: tuple[int, int]) -> None:
        """Remove a document from the index and the statistics (exactly undoing
        `index_document`); a key not indexed: nothing."""

    def store_vectors(
        self, slot: Slot, rowids: Sequence[int], vectors: npt.NDArray[np.float32], model_id: str
    ) -> None:
        """Write (or replace) the vectors of rows of the slot. A replaced vector is deleted
        (a tombstone) and the new one gets a new id. ValueError if the lengths differ."""

    def delete_vectors(self, corpus: int, rowids: Sequence[int]) -> None:
        """Delete the vectors of rows of one corpus, each leaving a tombstone."""

    def is_current(self, corpus: int, rowid: int, ns_id: int, text: str) -> bool:
        """Whether the row still exists in that namespace with that text (reindex's check)."""

    @property
    def entries(self) -> EntryWrites:
        """Entries' reads and writes."""

    @property
    def docs(self) -> DocWrites:
        """Document tables' reads and writes."""

    @property
    def neurons(self) -> NeuronWrites:
        """Neurons' reads and writes."""

    @property
    def graph(self) -> GraphWrites:
        """The graph's reads and writes."""

    @property
    def memorules(self) -> MemoruleWrites:
        """Memorules' reads and writes."""

    @property
    def tasks(self) -> TaskWrites:
        """Tasks' reads and writes."""


__all__ = [
    "BM25_B",
    "BM25_K1",
    "BM25_MIN_IDF",
    "CORPORA",
    "CORPUS_ENTRIES",
    "CORPUS_FACTS",
    "CORPUS_KNOWLEDGE",
    "Engine",
    "KindCount",
    "LexicalHit",
    "NamespaceVersion",
    "ReadStop",
    "Reader",
    "RecordCount",
    "Slot",
    "Stop",
    "TermStats",
    "TextChange",
    "Tombstone",
    "VectorCounts",
    "VectorRow",
    "Writer",
    "bm25_rank",
]
