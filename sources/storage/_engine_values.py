"""The values that cross the storage engine boundary (`sources.storage._engine`): term
statistics, slots, vector and text-log rows, counts, the lexical rank every engine gives, and
the stop a deadline trips. `sources.storage._engine` re-exports them."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, NamedTuple, Protocol

import attrs

BM25_K1: Final = 1.2
BM25_B: Final = 0.75
BM25_MIN_IDF: Final = 1e-6
"""FTS5's floor on a term's IDF (a term in more than half the documents would go negative)."""


# -- values that cross the boundary ----------------------------------------------------------


@attrs.frozen(kw_only=True)
class TermStats:
    """A namespace's statistics for some terms, read in one snapshot.

    `n_docs`: indexed documents of the namespace (all corpora); `total_len`: the sum of their
    term counts; `df`: for each asked term that occurs, the documents holding it (terms that
    occur nowhere are absent, never 0); `generation`: the namespace's write generation.
    All four are 0 / empty for a namespace that holds no document.
    """

    n_docs: int = attrs.field(validator=attrs.validators.ge(0))
    total_len: int = attrs.field(validator=attrs.validators.ge(0))
    df: Mapping[str, int]
    generation: int = 0


@attrs.frozen(kw_only=True)
class NamespaceVersion:
    """A namespace's id and its write generation (bumped by every committed write to it)."""

    ns_id: int
    generation: int


@attrs.frozen
class Slot:
    """Where vectors live: one corpus of one namespace. Every vector read names both."""

    ns_id: int
    corpus: int


class VectorRow(NamedTuple):
    """One stored vector (a tuple: a cold load reads 100k of them).

    `vector_id` is assigned by the engine; `rowid` is the row of its corpus it embeds;
    `vec` the little-endian float32 bytes (`sources.storage._vectors.to_blob`); `memory_type` the
    entry's (corpus 0 only; None for other corpora and unclassified entries).
    """

    vector_id: int
    rowid: int
    model_id: str
    vec: bytes
    memory_type: str | None


class Tombstone(NamedTuple):
    """A deleted vector: the tombstone's own id and the id of the vector it deleted."""

    tombstone_id: int
    vector_id: int


class TextChange(NamedTuple):
    """One change of the lexical index (added 19:10 UTC): a document (re)indexed (`op` 1) or
    removed (`op` -1), in commit order by `change_id`."""

    change_id: int
    corpus: int
    rowid: int
    op: int


class VectorCounts(NamedTuple):
    """Entries by vector state: of the model asked (`current`), of another (`stale`), none."""

    current: int
    stale: int
    missing: int


class KindCount(NamedTuple):
    """Entries of one namespace, kind and memory type ('' when unclassified)."""

    tenant_id: str
    project_id: str
    kind: str
    memory_type: str
    entries: int


class RecordCount(NamedTuple):
    """Records of one namespace in one of the tables beside the entries: facts, knowledge,
    graph nodes and edges, tasks."""

    tenant_id: str
    project_id: str
    kind: str
    records: int


RECORD_TABLES: tuple[tuple[str, str], ...] = (
    ("fact", "facts"),
    ("knowledge", "knowledge"),
    ("graph node", "graph_nodes"),
    ("graph edge", "graph_edges"),
    ("task", "tasks"),
)
"""(kind, table) of the records `record_counts` counts, in the order it reports them."""


def record_counts_sql() -> str:
    """One statement: a row per namespace (`namespaces n`), its tenant, its project and the count
    of each `RECORD_TABLES` table. The engine appends its filter on `n.` and its order; each
    count is a subquery on the namespace's rows, so only the namespaces kept are counted."""
    counts = ", ".join(
        f"(SELECT count(*) FROM {table} x WHERE x.ns_id = n.ns_id)" for _kind, table in RECORD_TABLES
    )
    return f"SELECT n.tenant_id, n.project_id, {counts} FROM namespaces n"


def record_counts_of(rows: Iterable[Sequence[object]]) -> list[RecordCount]:
    """`record_counts_sql`'s rows as `RecordCount`s, a kind counted none left out."""
    return [
        RecordCount(str(r[0]), str(r[1]), kind, int(str(n)))
        for r in rows
        for (kind, _table), n in zip(RECORD_TABLES, r[2:], strict=True)
        if int(str(n))
    ]


def bm25_rank(doc_terms: Sequence[str], query_terms: Sequence[str], stats: TermStats) -> float:
    """The lexical rank of one document for a query: SQLite FTS5's `bm25()`, lower is better.

    The definition every engine's `lexical_candidates` must reproduce (to 1e-9 relative):
    `-sum(idf(t) * f * (k1 + 1) / (f + k1 * (1 - b + b * len / avgdl)))` over the distinct
    query terms `t` the document holds, `f` its count of `t`, `len` its term count,
    `avgdl = total_len / n_docs`, `idf(t) = ln((n_docs - df + 0.5) / (df + 0.5))` floored at
    `BM25_MIN_IDF`, k1 = 1.2, b = 0.75. (Not the scorer's IDF, which adds a prior: the rank
    only chooses and orders candidates; scores are computed above the engine.)
    """
    n, length = stats.n_docs, len(doc_terms)
    avgdl = stats.total_len / n if n else 1.0
    counts: dict[str, int] = {}
    for term in doc_terms:
        counts[term] = counts.get(term, 0) + 1
    total = 0.0
    for term in dict.fromkeys(query_terms):
        f = counts.get(term, 0)
        if not f:
            continue
        df = stats.df.get(term, 0)
        idf = max(math.log((n - df + 0.5) / (df + 0.5)), BM25_MIN_IDF)
        total += idf * f * (BM25_K1 + 1) / (f + BM25_K1 * (1 - BM25_B + BM25_B * length / avgdl))
    return -total


class Stop(Protocol):
    """The interrupt of one read, tripped from another thread at the turn's deadline.

    `ReadStop` is the one the sources make, one per read; the engine registers how to stop
    its connection (`on_trip`) while the read holds one.
    """

    @property
    def tripped(self) -> bool:
        """True once the deadline passed: the read must end, every later statement failing."""

    def on_trip(self, interrupt: Callable[[], None] | None) -> None:
        """Register (None: unregister) the callable that stops the running statement.

        Called by the engine under the stop's lock, so a trip never reaches a connection
        already returned to the pool.
        """


@attrs.define(eq=False)
class ReadStop:
    """A `Stop`: a flag and, while a read holds a connection, how to interrupt it."""

    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _tripped: bool = attrs.field(default=False, init=False)
    _interrupt: Callable[[], None] | None = attrs.field(default=None, init=False)

    @property
    def tripped(self) -> bool:
        """True once `trip` was called."""
        return self._tripped

    def trip(self) -> None:
        """Stop the read: from any thread, any number of times."""
        with self._lock:
            self._tripped = True
            if self._interrupt is not None:
                self._interrupt()

    def on_trip(self, interrupt: Callable[[], None] | None) -> None:
        """Register (None: unregister) what stops the running statement."""
        with self._lock:
            self._interrupt = interrupt
