"""A read (`PostgresReader`) and a write (`PostgresWriter`) of one transaction: namespaces, the
lexical index and its statistics, vectors, upkeep counts.

Every statement runs in the tenant scope of the namespace it names (`_sql.Scope`); the few
upkeep reads that span namespaces say so (`every_tenant`). The lexical index is `_index`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from sources.storage._engine import (
    KindCount,
    NamespaceVersion,
    RecordCount,
    TermStats,
    TextChange,
    Tombstone,
    VectorCounts,
    VectorRow,
)
from sources.storage._engine_values import record_counts_of, record_counts_sql
from sources.storage._read_once import read_once

from . import _corpora, _ddl, _graph, _index, _memorules
from ._sql import CORPUS_TABLES, Scope

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import numpy.typing as npt
    from psycopg.rows import TupleRow

    from broker import Namespace
    from sources.storage._engine import Slot
    from sources.storage._runs import LexicalHit


_EF_SEARCH = 64
"""HNSW candidate list of a nearest-neighbour search (pgvector's default is 40)."""


@attrs.define(eq=False, slots=True)
class PostgresReader:
    """`sources.storage._engine.Reader` on one transaction (which the engine's `read` holds)."""

    scope: Scope

    # -- namespaces

    def namespace_id(self, namespace: Namespace) -> int | None:
        self.scope.tenant(namespace.tenant_id)  # the next statements' tenant, as a read of the row set it
        key = (namespace.tenant_id, namespace.project_id)
        # A write (READ COMMITTED) sees every committed namespace; a read answers from its
        # snapshot, which a namespace committed since it began must not reach.
        known = self.scope.ids.get(key) if self.scope.snapshot is None else None
        if known is not None:
            return known
        found = read_once(self.scope.snapshot, ("ns", namespace), lambda: self._namespace_id(namespace))
        if found is not None and found not in self.scope.created:  # committed: the same row for good
            self.scope.ids[key] = found
            self.scope.tenants[found] = namespace.tenant_id
        return found

    def _namespace_id(self, namespace: Namespace) -> int | None:
        row = self.scope.tenant(namespace.tenant_id).one(
            "SELECT ns_id FROM namespaces WHERE tenant_id = %s AND project_id = %s",
            (namespace.tenant_id, namespace.project_id),
        )
        return None if row is None else int(row[0])

    def namespace_ids(self) -> tuple[int, ...]:
        with self.scope.every_tenant():
            return tuple(int(r[0]) for r in self.scope.rows("SELECT ns_id FROM namespaces ORDER BY ns_id"))

    def versions(self, namespace: Namespace) -> tuple[NamespaceVersion, ...]:
        rows = self.scope.tenant(namespace.tenant_id).rows(
            "SELECT ns_id, generation FROM namespaces WHERE tenant_id = %s AND project_id = %s",
            (namespace.tenant_id, namespace.project_id),
        )
        return tuple(NamespaceVersion(ns_id=int(r[0]), generation=int(r[1])) for r in rows)

    def tenant_versions(self, tenant_id: str) -> tuple[NamespaceVersion, ...]:
        rows = self.scope.tenant(tenant_id).rows(
            "SELECT ns_id, generation FROM namespaces WHERE tenant_id = %s ORDER BY ns_id", (tenant_id,)
        )
        return tuple(NamespaceVersion(ns_id=int(r[0]), generation=int(r[1])) for r in rows)

    def generation(self, ns_id: int) -> int:
        return read_once(self.scope.snapshot, ("generation", ns_id), lambda: self._generation(ns_id))

    def _generation(self, ns_id: int) -> int:
        row = self.scope.ns(ns_id).one("SELECT generation FROM namespaces WHERE ns_id = %s", (ns_id,))
        return 0 if row is None else int(row[0])

    # -- the lexical index

    def term_stats(self, ns_id: int, terms: Sequence[str]) -> TermStats:
        return _index.stats(self.scope, ns_id, terms)

    def lexical_candidates(
        self, ns_id: int, terms: Sequence[str], *, corpus: int, limit: int
    ) -> list[LexicalHit]:
        return _index.candidates(self.scope, ns_id, terms, corpus=corpus, limit=limit)

    def indexed_terms(self, ns_id: int, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], list[str]]:
        if not keys:
            return {}
        rows = self.scope.ns(ns_id).rows(
            "SELECT d.corpus, d.src_rowid, d.terms FROM docs d "
            "JOIN unnest(%s::smallint[], %s::bigint[]) AS k(corpus, rowid) "
            "ON d.corpus = k.corpus AND d.src_rowid = k.rowid WHERE d.ns_id = %s",
            ([c for c, _ in keys], [r for _, r in keys], ns_id),
        )
        return {(int(r[0]), int(r[1])): list(r[2]) for r in rows}

    def indexed_documents(self, ns_id: int, *, chunk: int) -> Iterator[list[tuple[tuple[int, int], str]]]:
        # A server-side cursor: a namespace of a million documents is never held at once.
        self.scope.ns(ns_id)
        with self.scope.session.cursor("indexed_documents") as cur:
            cur.execute("SELECT corpus, src_rowid, terms FROM docs WHERE ns_id = %s", (ns_id,))
            while rows := cur.fetchmany(chunk):
                yield [((int(r[0]), int(r[1])), " ".join(r[2])) for r in rows]

    def text_log_bounds(self) -> tuple[int, int]:
        with self.scope.every_tenant():
            row = self.scope.one("SELECT min(change_id), max(change_id) FROM text_log")
        if row is None or row[0] is None:
            return (1, 0)
        return int(row[0]), int(row[1])

    def text_changes(self, ns_id: int, after: int, *, limit: int | None = None) -> list[TextChange]:
        rows = self.scope.ns(ns_id).rows(
            "SELECT change_id, corpus, src_rowid, op FROM text_log WHERE ns_id = %s AND change_id > %s "
            "ORDER BY change_id LIMIT %s",
            (ns_id, after, limit),
        )
        return [TextChange(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]

    # -- vectors

    def vector_rows(self, slot: Slot, after: int) -> list[VectorRow]:
        rows = self.scope.ns(slot.ns_id).rows(
            "SELECT v.id, v.src_rowid, v.model_id, v.vec, e.memory_type FROM vectors v "
            "LEFT JOIN entries e ON v.corpus = 0 AND e.rowid = v.src_rowid AND e.ns_id = v.ns_id "
            "WHERE v.ns_id = %s AND v.corpus = %s AND v.id > %s ORDER BY v.id",
            (slot.ns_id, slot.corpus, after),
        )
        return [VectorRow(int(r[0]), int(r[1]), str(r[2]), _blob(r[3]), r[4]) for r in rows]

    def vector_tombstones(self, slot: Slot, after: int) -> list[Tombstone]:
        rows = self.scope.ns(slot.ns_id).rows(
            "SELECT id, vector_id FROM vector_tombstones "
            "WHERE ns_id = %s AND corpus = %s AND id > %s ORDER BY id",
            (slot.ns_id, slot.corpus, after),
        )
        return [Tombstone(int(r[0]), int(r[1])) for r in rows]

    def tombstone_bounds(self) -> tuple[int, int]:
        with self.scope.every_tenant():
            row = self.scope.one("SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM vector_tombstones")
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def stored_vectors(
        self, slot: Slot, rowids: Sequence[int], model_id: str, dim: int
    ) -> dict[int, npt.NDArray[np.float32]]:
        rows = self.scope.ns(slot.ns_id).rows(
            "SELECT src_rowid, vec FROM vectors WHERE ns_id = %s AND corpus = %s AND model_id = %s "
            "AND src_rowid = ANY(%s)",
            (slot.ns_id, slot.corpus, model_id, [int(r) for r in rowids]),
        )
        return {int(r[0]): _array(r[1]).reshape(dim) for r in rows}

    def nearest(
        self, slot: Slot, query: npt.NDArray[np.float32], k: int, *, model_id: str
    ) -> list[tuple[int, float]]:
        """The `k` rows of the slot whose `model_id` vector is nearest `query`, best first:
        (rowid, cosine). Vectors of the indexed dimension (`_ddl.VECTOR_DIM`) go through
        the HNSW index, approximate as the usearch graph above the engine is; its iterative
        scan goes on past rows the namespace filter drops, so a small namespace in a large
        table still gets its `k`. Other dimensions are scanned exactly. Not in the protocol
        (yet): the sources' vector search runs above the engine, on `vector_rows`.
        """
        if k <= 0:
            return []
        vec = np.asarray(query, dtype=np.float32).reshape(-1)
        indexed = len(vec) == _ddl.VECTOR_DIM
        self.scope.ns(slot.ns_id)
        if indexed:
            self.scope.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            self.scope.execute(f"SET LOCAL hnsw.ef_search = {max(_EF_SEARCH, 2 * int(k))}")
        column = _ddl.HNSW_VEC if indexed else "vec"
        rows = self.scope.rows(
            f"SELECT src_rowid, 1 - ({column} <=> %(q)s) FROM vectors "
            "WHERE ns_id = %(ns)s AND corpus = %(corpus)s AND model_id = %(model)s "
            f"AND vector_dims(vec) = %(dim)s {'AND ' + _ddl.HNSW_ROWS if indexed else ''} "
            f"ORDER BY {column} <=> %(q)s LIMIT %(k)s",
            {"q": vec, "ns": slot.ns_id, "corpus": slot.corpus, "model": model_id, "dim": len(vec), "k": k},
        )
        # relaxed_order may return a few neighbours out of order: sort them exactly.
        return sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda h: (-h[1], h[0]))

    # -- upkeep

    def unembedded(self, corpus: int, model_id: str, dim: int) -> list[int]:
        with self.scope.every_tenant():
            rows = self.scope.rows(
                f"SELECT t.rowid FROM {CORPUS_TABLES[corpus]} t LEFT JOIN vectors v "
                "ON v.corpus = %s AND v.src_rowid = t.rowid "
                "WHERE v.model_id IS NULL OR v.model_id <> %s OR vector_dims(v.vec) <> %s ORDER BY t.rowid",
                (corpus, model_id, dim),
            )
        return [int(r[0]) for r in rows]

    def corpus_texts(self, corpus: int, rowids: Sequence[int]) -> list[tuple[int, int, str]]:
        with self.scope.every_tenant():
            rows = self.scope.rows(
                f"SELECT rowid, ns_id, text FROM {CORPUS_TABLES[corpus]} WHERE rowid = ANY(%s)",
                ([int(r) for r in rowids],),
            )
        return [(int(r[0]), int(r[1]), str(r[2])) for r in rows]

    def vector_counts(self, model_id: str, dim: int, namespace: Namespace | None) -> VectorCounts:
        sql = (
            "SELECT count(*) FILTER (WHERE v.model_id = %s AND vector_dims(v.vec) = %s), "
            "count(*) FILTER (WHERE v.model_id <> %s OR vector_dims(v.vec) <> %s), "
            "count(*) FILTER (WHERE v.model_id IS NULL) "
            "FROM entries e LEFT JOIN vectors v ON v.corpus = 0 AND v.src_rowid = e.rowid"
        )
        row = self._by_namespace(sql, (model_id, dim, model_id, dim), namespace, prefix="e.")[0]
        return VectorCounts(int(row[0]), int(row[1]), int(row[2]))

    def kind_counts(self, namespace: Namespace | None) -> list[KindCount]:
        sql = "SELECT tenant_id, project_id, kind, coalesce(memory_type, ''), count(*) FROM entries"
        rows = self._by_namespace(
            sql, (), namespace, prefix="", tail=" GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
        )
        return [KindCount(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4])) for r in rows]

    def record_counts(self, namespace: Namespace | None) -> list[RecordCount]:
        rows = self._by_namespace(record_counts_sql(), (), namespace, prefix="n.", tail=" ORDER BY 1, 2")
        return record_counts_of(rows)

    def _by_namespace(
        self,
        sql: str,
        params: tuple[object, ...],
        namespace: Namespace | None,
        *,
        prefix: str,
        tail: str = "",
    ) -> list[TupleRow]:
        """`sql` over one namespace, or (None) over every tenant's."""
        if namespace is None:
            with self.scope.every_tenant():
                return list(self.scope.rows(sql + tail, params))
        where = f" WHERE {prefix}tenant_id = %s AND {prefix}project_id = %s"
        return list(
            self.scope.tenant(namespace.tenant_id).rows(
                sql + where + tail, (*params, namespace.tenant_id, namespace.project_id)
            )
        )

    # -- the corpora

    @property
    def entries(self) -> _corpora.PostgresEntries:
        return _corpora.PostgresEntries(self.scope)

    @property
    def docs(self) -> _corpora.PostgresDocs:
        return _corpora.PostgresDocs(self.scope)

    @property
    def neurons(self) -> _corpora.PostgresNeurons:
        return _corpora.PostgresNeurons(self.scope)

    @property
    def graph(self) -> _graph.PostgresGraph:
        return _graph.PostgresGraph(self.scope)

    @property
    def memorules(self) -> _memorules.PostgresMemorules:
        return _memorules.PostgresMemorules(self.scope)

    @property
    def tasks(self) -> _graph.PostgresTasks:
        return _graph.PostgresTasks(self.scope)


def _array(vec: Any) -> npt.NDArray[np.float32]:  # noqa: ANN401 - pgvector's `Vector` (or an array)
    """A `vector` value as float32 (pgvector's adapter gives a `Vector`)."""
    return np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32)


def _blob(vec: Any) -> bytes:  # noqa: ANN401 - as `_array`
    """A stored vector as the little-endian float32 bytes the matrices load."""
    return _array(vec).astype("<f4").tobytes()


@attrs.define(eq=False, slots=True)
class PostgresWriter(PostgresReader):
    """`sources.storage._engine.Writer` on one write transaction (READ COMMITTED; a namespace's
    writers serialised by its lock, `_sql.Scope.lock_ns`)."""

    def ensure_namespace(self, namespace: Namespace) -> int:
        found = self.namespace_id(namespace)
        if found is not None:
            self.scope.ns(found)  # the namespace's lock, before anything is written to it
            return found
        # Two writers may create it at once: the loser inserts nothing and reads the winner's.
        row = self.scope.tenant(namespace.tenant_id).one(
            "INSERT INTO namespaces (tenant_id, project_id) VALUES (%s, %s) "
            "ON CONFLICT (tenant_id, project_id) DO NOTHING RETURNING ns_id",
            (namespace.tenant_id, namespace.project_id),
        )
        if row is not None:
            self.scope.created.add(int(row[0]))
        ns_id = int(row[0]) if row is not None else self.namespace_id(namespace)
        if ns_id is None:
            msg = f"namespace {namespace} vanished while it was created"
            raise RuntimeError(msg)
        self.scope.tenants[ns_id] = namespace.tenant_id
        self.scope.ns(ns_id)  # the namespace's lock, before anything is written to it
        return ns_id

    def index_document(self, ns_id: int, key: tuple[int, int], terms: Sequence[str]) -> None:
        _index.index(self.scope, ns_id, key, terms)

    def index_documents(self, ns_id: int, docs: Sequence[tuple[tuple[int, int], Sequence[str]]]) -> None:
        _index.index_many(self.scope, ns_id, docs)

    def unindex_document(self, ns_id: int, key: tuple[int, int]) -> None:
        _index.unindex(self.scope, ns_id, key)

    def store_vectors(
        self, slot: Slot, rowids: Sequence[int], vectors: npt.NDArray[np.float32], model_id: str
    ) -> None:
        if len(rowids) != len(vectors):
            msg = f"{len(rowids)} rowids but {len(vectors)} vectors"
            raise ValueError(msg)
        # Under the namespace's lock: ids then commit in id order within the slot. Delete, then
        # insert: a replaced vector leaves a tombstone and gets a new id.
        self.scope.ns(slot.ns_id).lock_ns(slot.ns_id)
        _index.delete_vectors(self.scope, slot.corpus, rowids, ns_id=slot.ns_id)
        self.scope.session.executemany(
            "INSERT INTO vectors (corpus, src_rowid, ns_id, model_id, vec) VALUES (%s, %s, %s, %s, %s)",
            [
                (slot.corpus, int(r), slot.ns_id, model_id, np.asarray(v, dtype=np.float32))
                for r, v in zip(rowids, vectors, strict=True)
            ],
        )

    def delete_vectors(self, corpus: int, rowids: Sequence[int]) -> None:
        _index.delete_vectors(self.scope, corpus, rowids)

    def is_current(self, corpus: int, rowid: int, ns_id: int, text: str) -> bool:
        row = self.scope.ns(ns_id).one(
            f"SELECT 1 FROM {CORPUS_TABLES[corpus]} WHERE rowid = %s AND ns_id = %s AND text = %s",
            (rowid, ns_id, text),
        )
        return row is not None
