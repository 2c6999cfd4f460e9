"""A read (`SqliteReader`) and a write (`SqliteWriter`) on one SQLite connection: namespaces,
the per-namespace FTS5 index and its statistics, vectors, upkeep counts.

A namespace's index is one FTS5 table (`sources.storage._sqlite._schema.fts_table`) holding every corpus,
each document under `fts_rowid(corpus, rowid)`, its body the analysed terms joined by
spaces; `n_docs` and `total_len` live in `namespaces`, per-term document counts in the
table's fts5vocab. FTS5's own `bm25()` is `sources.storage._engine.bm25_rank` on those statistics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import attrs

from sources.storage._engine import (
    CORPUS_ENTRIES,
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
from sources.storage._quantised import from_blobs, to_blob
from sources.storage._read_once import ReadOnce, read_once
from sources.storage._runs import LexicalHit

from . import _corpora, _graph, _memorules, _schema
from ._sql import CORPUS_TABLES, delete_vectors, fts_match, fts_terms, log_texts, select_in, unindex

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator, Sequence

    import numpy as np
    import numpy.typing as npt

    from broker import Namespace
    from sources.storage._engine import Slot


@attrs.define(eq=False, slots=True)
class SqliteReader:
    """`sources.storage._engine.Reader` on one connection (which the engine's `read` holds)."""

    conn: sqlite3.Connection
    snapshot: ReadOnce | None = None
    """The read snapshot's reads of a namespace's id and generation (the engine's `read`);
    None in a write, which reads its own changes."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Run raw SQL (SQLite only: tests, migrations and maintenance, never a corpus)."""
        return self.conn.execute(sql, params)

    # -- namespaces

    def namespace_id(self, namespace: Namespace) -> int | None:
        return read_once(self.snapshot, ("ns", namespace), lambda: self._namespace_id(namespace))

    def _namespace_id(self, namespace: Namespace) -> int | None:
        row = self.conn.execute(
            "SELECT ns_id FROM namespaces WHERE tenant_id = ? AND project_id = ?",
            (namespace.tenant_id, namespace.project_id),
        ).fetchone()
        return None if row is None else int(row[0])

    def namespace_ids(self) -> tuple[int, ...]:
        return tuple(int(r[0]) for r in self.conn.execute("SELECT ns_id FROM namespaces ORDER BY ns_id"))

    def versions(self, namespace: Namespace) -> tuple[NamespaceVersion, ...]:
        rows = self.conn.execute(
            "SELECT ns_id, generation FROM namespaces WHERE tenant_id = ? AND project_id = ?",
            (namespace.tenant_id, namespace.project_id),
        ).fetchall()
        return tuple(NamespaceVersion(ns_id=int(r[0]), generation=int(r[1])) for r in rows)

    def tenant_versions(self, tenant_id: str) -> tuple[NamespaceVersion, ...]:
        rows = self.conn.execute(
            "SELECT ns_id, generation FROM namespaces WHERE tenant_id = ? ORDER BY ns_id", (tenant_id,)
        ).fetchall()
        return tuple(NamespaceVersion(ns_id=int(r[0]), generation=int(r[1])) for r in rows)

    def generation(self, ns_id: int) -> int:
        return read_once(self.snapshot, ("generation", ns_id), lambda: self._generation(ns_id))

    def _generation(self, ns_id: int) -> int:
        row = self.conn.execute("SELECT generation FROM namespaces WHERE ns_id = ?", (ns_id,)).fetchone()
        return 0 if row is None else int(row[0])

    # -- the lexical index

    def term_stats(self, ns_id: int, terms: Sequence[str]) -> TermStats:
        row = self.conn.execute(
            "SELECT n_docs, total_len, generation FROM namespaces WHERE ns_id = ?", (ns_id,)
        ).fetchone()
        if row is None:
            return TermStats(n_docs=0, total_len=0, df={})
        df = {
            str(term): int(doc)
            for term, doc in select_in(
                self.conn,
                f"SELECT term, doc FROM {_schema.vocab_table(ns_id)} WHERE term IN ({{marks}})",
                list(terms),
            )
        }
        return TermStats(n_docs=int(row[0]), total_len=int(row[1]), df=df, generation=int(row[2]))

    def lexical_candidates(
        self, ns_id: int, terms: Sequence[str], *, corpus: int, limit: int
    ) -> list[LexicalHit]:
        # The rank is taken in the FTS table and only the top `limit` bodies are read: reading
        # every match's body before the sort costs about twice as much at 100k.
        terms = fts_terms(terms)
        if not terms:
            return []
        table = _schema.fts_table(ns_id)
        rows = self.conn.execute(
            f"SELECT top.r, top.rank, b.body FROM (SELECT rowid AS r, bm25({table}) AS rank FROM {table} "
            f"WHERE {table} MATCH ? AND (rowid & 3) = ? ORDER BY rank, rowid LIMIT ?) AS top "
            f"JOIN {table} b ON b.rowid = top.r ORDER BY top.rank, top.r",
            (fts_match(terms), corpus, limit),
        ).fetchall()
        return [
            LexicalHit(_schema.split_fts_rowid(int(r))[1], float(rank), tuple(str(body).split()))
            for r, rank, body in rows
        ]

    def indexed_terms(self, ns_id: int, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], list[str]]:
        if not keys:
            return {}
        by_fts = {_schema.fts_rowid(c, r): (c, r) for c, r in keys}
        rows = select_in(
            self.conn,
            f"SELECT rowid, body FROM {_schema.fts_table(ns_id)} WHERE rowid IN ({{marks}})",
            list(by_fts),
        )
        return {by_fts[int(r[0])]: str(r[1]).split() for r in rows}

    def indexed_documents(self, ns_id: int, *, chunk: int) -> Iterator[list[tuple[tuple[int, int], str]]]:
        cursor = self.conn.execute(f"SELECT rowid, body FROM {_schema.fts_table(ns_id)}")
        while rows := cursor.fetchmany(chunk):
            yield [(_schema.split_fts_rowid(int(r)), str(body)) for r, body in rows]

    def text_log_bounds(self) -> tuple[int, int]:
        # One aggregate a subquery: SQLite reads min() or max() alone off the key, both together by a scan.
        row = self.conn.execute(
            "SELECT (SELECT min(id) FROM text_log), (SELECT max(id) FROM text_log)"
        ).fetchone()
        return (1, int(row[1] or 0)) if row[0] is None else (int(row[0]), int(row[1]))

    def text_changes(self, ns_id: int, after: int, *, limit: int | None = None) -> list[TextChange]:
        rows = self.conn.execute(
            "SELECT id, fts_rowid, op FROM text_log WHERE ns_id = ? AND id > ? ORDER BY id LIMIT ?",
            (ns_id, after, -1 if limit is None else limit),
        )
        return [TextChange(int(i), *_schema.split_fts_rowid(int(r)), int(op)) for i, r, op in rows]

    # -- vectors

    def vector_rows(self, slot: Slot, after: int) -> list[VectorRow]:
        # Entries carry their memory type for the typed filter, joined within the namespace.
        if slot.corpus == CORPUS_ENTRIES:
            sql = (
                "SELECT v.id, v.src_rowid, v.model_id, v.vec, e.memory_type FROM vectors v "
                "LEFT JOIN entries e ON e.rowid = v.src_rowid AND e.ns_id = v.ns_id "
                "WHERE v.ns_id = ? AND v.corpus = ? AND v.id > ? ORDER BY v.id"
            )
        else:
            sql = (
                "SELECT id, src_rowid, model_id, vec, NULL FROM vectors "
                "WHERE ns_id = ? AND corpus = ? AND id > ? ORDER BY id"
            )
        return [
            VectorRow(int(r[0]), int(r[1]), str(r[2]), bytes(r[3]), r[4])
            for r in self.conn.execute(sql, (slot.ns_id, slot.corpus, after))
        ]

    def vector_tombstones(self, slot: Slot, after: int) -> list[Tombstone]:
        return [
            Tombstone(int(r[0]), int(r[1]))
            for r in self.conn.execute(
                "SELECT id, vector_id FROM vector_tombstones "
                "WHERE ns_id = ? AND corpus = ? AND id > ? ORDER BY id",
                (slot.ns_id, slot.corpus, after),
            )
        ]

    def tombstone_bounds(self) -> tuple[int, int]:
        row = self.conn.execute(
            "SELECT coalesce((SELECT min(id) FROM vector_tombstones), 0), "
            "coalesce((SELECT max(id) FROM vector_tombstones), 0)"
        ).fetchone()
        return int(row[0]), int(row[1])

    def stored_vectors(
        self, slot: Slot, rowids: Sequence[int], model_id: str, dim: int
    ) -> dict[int, npt.NDArray[np.float32]]:
        # `+ns_id`: without statistics SQLite prefers the (ns_id, corpus) index and reads every
        # vector of the namespace's corpus (37 ms at 71k rows) instead of seeking the rows by
        # the unique (corpus, src_rowid) index; the unary plus keeps ns_id out of the choice.
        rows = select_in(
            self.conn,
            "SELECT src_rowid, vec FROM vectors WHERE +ns_id = ? AND corpus = ? AND model_id = ? "
            "AND src_rowid IN ({marks})",
            [int(r) for r in rowids],
            (slot.ns_id, slot.corpus, model_id),
        )
        return {int(src): from_blobs([blob], dim)[0] for src, blob in rows}

    # -- upkeep

    def unembedded(self, corpus: int, model_id: str, dim: int) -> list[int]:
        return [
            int(r[0])
            for r in self.conn.execute(
                f"SELECT t.rowid FROM {CORPUS_TABLES[corpus]} t LEFT JOIN vectors v "
                "ON v.corpus = ? AND v.src_rowid = t.rowid "
                "WHERE v.model_id IS NULL OR v.model_id != ? OR length(v.vec) != ? ORDER BY t.rowid",
                (corpus, model_id, 4 * dim),
            )
        ]

    def corpus_texts(self, corpus: int, rowids: Sequence[int]) -> list[tuple[int, int, str]]:
        sql = f"SELECT rowid, ns_id, text FROM {CORPUS_TABLES[corpus]} WHERE rowid IN ({{marks}})"
        return [(int(r[0]), int(r[1]), str(r[2])) for r in select_in(self.conn, sql, list(rowids))]

    def vector_counts(self, model_id: str, dim: int, namespace: Namespace | None) -> VectorCounts:
        where, params = _namespace_filter(namespace, prefix="e.")
        row = self.conn.execute(
            "SELECT total(v.model_id = ? AND length(v.vec) = ?), "
            "total(v.model_id != ? OR length(v.vec) != ?), total(v.model_id IS NULL) "
            f"FROM entries e LEFT JOIN vectors v ON v.corpus = 0 AND v.src_rowid = e.rowid{where}",
            (model_id, 4 * dim, model_id, 4 * dim, *params),
        ).fetchone()
        return VectorCounts(int(row[0]), int(row[1]), int(row[2]))

    def kind_counts(self, namespace: Namespace | None) -> list[KindCount]:
        where, params = _namespace_filter(namespace, prefix="")
        rows = self.conn.execute(
            "SELECT tenant_id, project_id, kind, COALESCE(memory_type, ''), count(*) "
            f"FROM entries{where} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
            params,
        ).fetchall()
        return [KindCount(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4])) for r in rows]

    def record_counts(self, namespace: Namespace | None) -> list[RecordCount]:
        where, params = _namespace_filter(namespace, prefix="n.")
        return record_counts_of(self.conn.execute(f"{record_counts_sql()}{where} ORDER BY 1, 2", params))

    # -- the corpora

    @property
    def entries(self) -> _corpora.SqliteEntries:
        return _corpora.SqliteEntries(self.conn)

    @property
    def docs(self) -> _corpora.SqliteDocs:
        return _corpora.SqliteDocs(self.conn)

    @property
    def neurons(self) -> _corpora.SqliteNeurons:
        return _corpora.SqliteNeurons(self.conn)

    @property
    def graph(self) -> _graph.SqliteGraph:
        return _graph.SqliteGraph(self.conn)

    @property
    def memorules(self) -> _memorules.SqliteMemorules:
        return _memorules.SqliteMemorules(self.conn)

    @property
    def tasks(self) -> _graph.SqliteTasks:
        return _graph.SqliteTasks(self.conn)


def _namespace_filter(namespace: Namespace | None, *, prefix: str) -> tuple[str, tuple[str, ...]]:
    if namespace is None:
        return "", cast("tuple[str, ...]", ())
    return (
        f" WHERE {prefix}tenant_id = ? AND {prefix}project_id = ?",
        (namespace.tenant_id, namespace.project_id),
    )


@attrs.define(eq=False, slots=True)
class SqliteWriter(SqliteReader):
    """`sources.storage._engine.Writer` on the writer connection, inside its `BEGIN IMMEDIATE`."""

    def ensure_namespace(self, namespace: Namespace) -> int:
        found = self.namespace_id(namespace)
        if found is not None:
            return found
        cur = self.conn.execute(
            "INSERT INTO namespaces (tenant_id, project_id) VALUES (?, ?)",
            (namespace.tenant_id, namespace.project_id),
        )
        ns_id = int(cur.lastrowid or 0)
        _schema.create_namespace_index(self.conn, ns_id)
        return ns_id

    def index_document(self, ns_id: int, key: tuple[int, int], terms: Sequence[str]) -> None:
        self.index_documents(ns_id, [(key, terms)])

    def index_documents(self, ns_id: int, docs: Sequence[tuple[tuple[int, int], Sequence[str]]]) -> None:
        if not docs:
            return
        fts_rowids = [_schema.fts_rowid(*key) for key, _ in docs]
        self.conn.executemany(
            f"INSERT INTO {_schema.fts_table(ns_id)} (rowid, body) VALUES (?, ?)",
            [(r, " ".join(terms)) for r, (_, terms) in zip(fts_rowids, docs, strict=True)],
        )
        self.conn.execute(
            "UPDATE namespaces SET n_docs = n_docs + ?, total_len = total_len + ? WHERE ns_id = ?",
            (len(docs), sum(len(terms) for _, terms in docs), ns_id),
        )
        log_texts(self.conn, ns_id, fts_rowids, 1)

    def unindex_document(self, ns_id: int, key: tuple[int, int]) -> None:
        unindex(self.conn, ns_id, key)

    def store_vectors(
        self, slot: Slot, rowids: Sequence[int], vectors: npt.NDArray[np.float32], model_id: str
    ) -> None:
        if len(rowids) != len(vectors):
            msg = f"{len(rowids)} rowids but {len(vectors)} vectors"
            raise ValueError(msg)
        # Delete, then insert: a replaced vector leaves a tombstone and gets a new id (an
        # INSERT OR REPLACE would fire no delete trigger).
        delete_vectors(self.conn, slot.corpus, rowids)
        self.conn.executemany(
            "INSERT INTO vectors (corpus, src_rowid, ns_id, model_id, vec) VALUES (?, ?, ?, ?, ?)",
            [
                (slot.corpus, int(r), slot.ns_id, model_id, to_blob(v))
                for r, v in zip(rowids, vectors, strict=True)
            ],
        )

    def delete_vectors(self, corpus: int, rowids: Sequence[int]) -> None:
        delete_vectors(self.conn, corpus, rowids)

    def is_current(self, corpus: int, rowid: int, ns_id: int, text: str) -> bool:
        row = self.conn.execute(
            f"SELECT 1 FROM {CORPUS_TABLES[corpus]} WHERE rowid = ? AND ns_id = ? AND text = ?",
            (rowid, ns_id, text),
        ).fetchone()
        return row is not None
