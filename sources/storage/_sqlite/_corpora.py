"""Entries, documents (facts, knowledge) and neurons in SQLite (`sources.storage._engine_corpora`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from sources.storage._engine import CORPUS_ENTRIES, CORPUS_FACTS, CORPUS_KNOWLEDGE
from sources.storage._engine_corpora import EntryRecord, NeuronRecord
from sources.storage._entries import TURN_HEAD_CHARS, entry_values, is_turn

from . import _schema
from ._sql import delete_vectors, fts_match, fts_terms, marks, select_in, unindex

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable, Mapping, Sequence

    from broker import Namespace
    from sources.storage._entries import EntryRow

ENTRY_COLS = "rowid, id, tenant_id, project_id, kind, memory_type, text, created_at, importance, metadata"
_E_COLS = ", ".join(f"e.{c.strip()}" for c in ENTRY_COLS.split(","))
_NEURON_COLS = "rowid, id, memory_type, text, created_at, importance, metadata"


def _entries(rows: Sequence[Sequence[Any]]) -> list[EntryRecord]:
    """`EntryRecord`s of rows of ENTRY_COLS and the indexed body (a hot path: one list pass)."""
    make = EntryRecord._make
    return [make((*r[:10], None if r[10] is None else tuple(r[10].split()))) for r in rows]


@attrs.define(eq=False, slots=True)
class SqliteEntries:
    """`EntryReads` and `EntryWrites` over the `entries` table."""

    conn: sqlite3.Connection

    def find(self, ns_id: int, id: str) -> tuple[int, str] | None:  # noqa: A002
        row = self.conn.execute(
            "SELECT rowid, kind FROM entries WHERE ns_id = ? AND id = ?", (ns_id, id)
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def find_many(self, ns_id: int, ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        sql = "SELECT id, rowid, kind FROM entries WHERE ns_id = ? AND id IN ({marks})"
        return {str(r[0]): (int(r[1]), str(r[2])) for r in select_in(self.conn, sql, list(ids), (ns_id,))}

    def by_id(self, namespace: Namespace, id: str) -> EntryRecord | None:  # noqa: A002
        row = self.conn.execute(
            f"SELECT {ENTRY_COLS} FROM entries WHERE tenant_id = ? AND project_id = ? AND id = ?",
            (namespace.tenant_id, namespace.project_id, id),
        ).fetchone()
        return None if row is None else EntryRecord(*row)

    def page(self, namespace: Namespace, *, limit: int, offset: int) -> list[EntryRecord]:
        rows = self.conn.execute(
            f"SELECT {ENTRY_COLS} FROM entries WHERE tenant_id = ? AND project_id = ? "
            "ORDER BY created_at, id LIMIT ? OFFSET ?",
            (namespace.tenant_id, namespace.project_id, limit, offset),
        ).fetchall()
        return [EntryRecord(*r) for r in rows]

    def texts(self, ns_id: int, ids: Sequence[str]) -> dict[str, str]:
        sql = "SELECT id, text FROM entries WHERE ns_id = ? AND id IN ({marks})"
        return {str(r[0]): str(r[1]) for r in select_in(self.conn, sql, list(ids), (ns_id,))}

    def rows(self, ns_id: int, rowids: Sequence[int]) -> list[EntryRecord]:
        # Every read by rowid names the namespace: a rowid alone may have been reused by
        # another tenant's memory since it was found.
        if not rowids:
            return []
        table = _schema.fts_table(ns_id)
        rows = select_in(
            self.conn,
            f"SELECT {_E_COLS}, f.body FROM entries e LEFT JOIN {table} f ON f.rowid = e.rowid * 4 "
            "WHERE +e.ns_id = ? AND e.rowid IN ({marks})",
            list(rowids),
            (ns_id,),
        )
        return _entries(rows)

    def lexical(
        self, ns_id: int, terms: Sequence[str], *, types: Sequence[str] | None, limit: int
    ) -> list[EntryRecord]:
        terms = fts_terms(terms)
        if not terms:
            return []
        table = _schema.fts_table(ns_id)
        # Rank in the FTS table, then read the top k's columns and analysed bodies: reading
        # them for every match before the sort made this query about 2x slower at 100k.
        # A typed query filters on the entry, so its join comes before the limit.
        typed, params = "", [fts_match(terms)]
        if types is not None:
            typed = (
                f" JOIN entries t ON t.rowid = ({table}.rowid >> 2)"
                f" AND (t.memory_type IN ({marks(len(types))}) OR t.memory_type IS NULL)"
            )
            params = [*types, fts_match(terms)]
        rows = self.conn.execute(
            f"SELECT {_E_COLS}, b.body FROM (SELECT {table}.rowid AS fts_rowid, bm25({table}) AS rank "
            f"FROM {table}{typed} WHERE {table} MATCH ? AND ({table}.rowid & 3) = 0 "
            f"ORDER BY rank, {table}.rowid LIMIT ?) AS top "
            "JOIN entries e ON e.rowid = (top.fts_rowid >> 2) "
            f"JOIN {table} b ON b.rowid = top.fts_rowid ORDER BY top.rank, top.fts_rowid",
            [*params, limit],
        ).fetchall()
        return _entries(rows)

    def typed(self, ns_id: int, rowids: Sequence[int], types: Sequence[str]) -> set[int]:
        sql = (
            "SELECT rowid FROM entries WHERE +ns_id = ? "
            f"AND (memory_type IN ({marks(len(types))}) OR memory_type IS NULL) AND rowid IN ({{marks}})"
        )
        return {int(r[0]) for r in select_in(self.conn, sql, list(rowids), (ns_id, *types))}

    def memory_types(self, ns_id: int, rowids: Sequence[int] | None) -> dict[int, str | None]:
        rows: Iterable[Any]
        if rowids is None:
            rows = self.conn.execute("SELECT rowid, memory_type FROM entries WHERE ns_id = ?", (ns_id,))
        else:
            sql = "SELECT rowid, memory_type FROM entries WHERE +ns_id = ? AND rowid IN ({marks})"
            rows = select_in(self.conn, sql, list(rowids), (ns_id,))
        return {int(r): t for r, t in rows}

    def episodic_turns(self, ns_id: int, rowids: Sequence[int]) -> dict[int, bool]:
        sql = (
            f"SELECT rowid, instr(text, '?') > 0, kind, substr(text, 1, {TURN_HEAD_CHARS}) FROM entries "
            "WHERE +ns_id = ? AND memory_type = 'episodic' AND rowid IN ({marks})"
        )
        rows = select_in(self.conn, sql, list(rowids), (ns_id,))
        return {int(r): bool(q) for r, q, kind, head in rows if is_turn(kind, head)}

    def insert(self, ns_id: int, namespace: Namespace, row: EntryRow) -> int:
        return self.insert_many(ns_id, namespace, [row])[0]

    def insert_many(self, ns_id: int, namespace: Namespace, rows: Sequence[EntryRow]) -> list[int]:
        # One statement for the batch, then its rowids by id (unique in the namespace).
        self.conn.executemany(
            "INSERT INTO entries (id, ns_id, tenant_id, project_id, kind, memory_type, text, "
            "created_at, importance, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [entry_values(ns_id, namespace, row) for row in rows],
        )
        found = self.find_many(ns_id, [row.id for row in rows])
        return [found[row.id][0] for row in rows]

    def update_text(self, ns_id: int, rowid: int, *, text: str, metadata: str) -> None:
        self.conn.execute(
            "UPDATE entries SET text = ?, metadata = ? WHERE rowid = ? AND ns_id = ?",
            (text, metadata, rowid, ns_id),
        )

    def delete(self, ns_id: int, rowid: int) -> None:
        unindex(self.conn, ns_id, (CORPUS_ENTRIES, rowid))
        delete_vectors(self.conn, CORPUS_ENTRIES, [rowid])
        self.conn.execute("DELETE FROM neuron_triggers WHERE ns_id = ? AND entry_rowid = ?", (ns_id, rowid))
        self.conn.execute("DELETE FROM memorule_states WHERE entry_rowid = ?", (rowid,))
        self.conn.execute("DELETE FROM entries WHERE ns_id = ? AND rowid = ?", (ns_id, rowid))


_DOC_CORPUS = {"facts": CORPUS_FACTS, "knowledge": CORPUS_KNOWLEDGE}


def _doc_table(table: str) -> str:
    """The table, checked: a document table's name is an identifier, never user input."""
    if table not in _DOC_CORPUS:
        msg = f"not a document table: {table!r}"
        raise ValueError(msg)
    return table


@attrs.define(eq=False, slots=True)
class SqliteDocs:
    """`DocReads` and `DocWrites` over the document tables."""

    conn: sqlite3.Connection

    def find(self, table: str, ns_id: int, id: str) -> int | None:  # noqa: A002
        sql = f"SELECT rowid FROM {_doc_table(table)} WHERE ns_id = ? AND id = ?"
        row = self.conn.execute(sql, (ns_id, id)).fetchone()
        return None if row is None else int(row[0])

    def find_many(self, table: str, ns_id: int, ids: Sequence[str]) -> dict[str, int]:
        sql = f"SELECT id, rowid FROM {_doc_table(table)} WHERE ns_id = ? AND id IN ({{marks}})"
        return {str(r[0]): int(r[1]) for r in select_in(self.conn, sql, list(ids), (ns_id,))}

    def rows(
        self, table: str, ns_id: int, rowids: Sequence[int], columns: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        cols = ", ".join(("rowid", "id", *columns))
        sql = f"SELECT {cols} FROM {_doc_table(table)} WHERE +ns_id = ? AND rowid IN ({{marks}})"
        return [tuple(r) for r in select_in(self.conn, sql, list(rowids), (ns_id,))]

    def insert(self, table: str, ns_id: int, values: Mapping[str, Any]) -> int:
        return self.insert_many(table, ns_id, [values])[0]

    def insert_many(self, table: str, ns_id: int, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        if not rows:
            return []
        cols = ["ns_id", *rows[0]]
        self.conn.executemany(
            f"INSERT INTO {_doc_table(table)} ({', '.join(cols)}) VALUES ({marks(len(cols))})",
            [[ns_id, *(row[c] for c in cols[1:])] for row in rows],
        )
        found = self.find_many(table, ns_id, [str(row["id"]) for row in rows])
        return [found[str(row["id"])] for row in rows]

    def delete(self, table: str, ns_id: int, rowid: int) -> None:
        corpus = _DOC_CORPUS[_doc_table(table)]
        unindex(self.conn, ns_id, (corpus, rowid))
        delete_vectors(self.conn, corpus, [rowid])
        self.conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))


@attrs.define(eq=False, slots=True)
class SqliteNeurons:
    """`NeuronReads` and `NeuronWrites` over `neuron_triggers` and the neurons' entries."""

    conn: sqlite3.Connection

    def find(self, ns_id: int, id: str) -> int | None:  # noqa: A002
        row = self.conn.execute(
            "SELECT rowid FROM entries WHERE ns_id = ? AND id = ? AND kind = 'neuron'", (ns_id, id)
        ).fetchone()
        return None if row is None else int(row[0])

    def matching(self, ns_id: int, terms: Sequence[str]) -> list[tuple[int, str]]:
        sql = "SELECT entry_rowid, term FROM neuron_triggers WHERE ns_id = ? AND term IN ({marks})"
        return sorted({(int(r[0]), str(r[1])) for r in select_in(self.conn, sql, list(terms), (ns_id,))})

    def triggers(self, ns_id: int, rowids: Sequence[int]) -> list[tuple[int, str]]:
        sql = "SELECT entry_rowid, term FROM neuron_triggers WHERE +ns_id = ? AND entry_rowid IN ({marks})"
        return [(int(r[0]), str(r[1])) for r in select_in(self.conn, sql, list(rowids), (ns_id,))]

    def rows(self, ns_id: int, rowids: Sequence[int], types: Sequence[str] | None) -> list[NeuronRecord]:
        typed, params = "", list[object]([ns_id])
        if types is not None:
            typed = f" AND (memory_type IN ({marks(len(types))}) OR memory_type IS NULL)"
            params += list(types)
        sql = (
            f"SELECT {_NEURON_COLS} FROM entries WHERE ns_id = ? AND kind = 'neuron'{typed} "
            "AND rowid IN ({marks})"
        )
        rows = [NeuronRecord(*r) for r in select_in(self.conn, sql, list(rowids), params)]
        rows.sort(key=lambda r: r.rowid)
        return rows

    def add_triggers(self, ns_id: int, rowid: int, terms: Sequence[str]) -> None:
        self.conn.executemany(
            "INSERT INTO neuron_triggers (ns_id, term, entry_rowid) VALUES (?, ?, ?)",
            [(ns_id, term, rowid) for term in terms],
        )
