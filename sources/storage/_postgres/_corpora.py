"""Entries, documents (facts, knowledge) and neurons in PostgreSQL (`sources.storage._engine_corpora`).

Every statement names its namespace and runs in its tenant's scope (`_sql.Scope`); deletes
reach every index and side table, as the protocol asks.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Final

import attrs

from sources.storage._engine import CORPUS_ENTRIES, CORPUS_FACTS, CORPUS_KNOWLEDGE, bm25_rank
from sources.storage._engine_corpora import EntryRecord, NeuronRecord
from sources.storage._entries import TURN_HEAD_CHARS, entry_values, is_turn

from . import _index

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from broker import Namespace
    from sources.storage._entries import EntryRow

    from ._sql import Scope

ENTRY_COLS: Final = (
    "rowid, id, tenant_id, project_id, kind, memory_type, text, created_at, importance, metadata"
)
E_COLS: Final = ", ".join(f"e.{c.strip()}" for c in ENTRY_COLS.split(","))
_NEURON_COLS: Final = "rowid, id, memory_type, text, created_at, importance, metadata"
_DOC_CORPUS: Final = {"facts": CORPUS_FACTS, "knowledge": CORPUS_KNOWLEDGE}
_ENTRY_ARRAYS: Final = (
    (0, "id"),
    (4, "kind"),
    (5, "memory_type"),
    (6, "text"),
    (7, "created_at"),
    (8, "importance"),
    (9, "metadata"),
)
"""The per-row columns of `entry_values` a batch passes as arrays, by position."""
_INSERT_ENTRY: Final = (
    "INSERT INTO entries (id, ns_id, tenant_id, project_id, kind, memory_type, text, "
    "created_at, importance, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "RETURNING rowid"
)
_INSERT_ENTRIES: Final = (
    "INSERT INTO entries (id, ns_id, tenant_id, project_id, kind, memory_type, text, "
    "created_at, importance, metadata) "
    "SELECT u.id, %(ns)s, %(tenant)s, %(project)s, u.kind, u.memory_type, u.text, u.created_at, "
    "u.importance, u.metadata FROM unnest(%(id)s::text[], %(kind)s::text[], %(memory_type)s::text[], "
    "%(text)s::text[], %(created_at)s::text[], %(importance)s::double precision[], %(metadata)s::text[]) "
    "WITH ORDINALITY AS u(id, kind, memory_type, text, created_at, importance, metadata, o) "
    "ORDER BY u.o RETURNING rowid, id"
)
"""A batch of entries in one statement; rowids are matched back by id (unique in a namespace)."""


def _entry(row: Sequence[Any], terms: Sequence[str] | None = None) -> EntryRecord:
    return EntryRecord._make((*row[:10], None if terms is None else tuple(terms)))


def _doc_table(table: str) -> str:
    """The table, checked: a document table's name is an identifier, never user input."""
    if table not in _DOC_CORPUS:
        msg = f"not a document table: {table!r}"
        raise ValueError(msg)
    return table


@attrs.define(eq=False, slots=True)
class PostgresEntries:
    """`EntryReads` and `EntryWrites` over the `entries` table."""

    scope: Scope

    def find(self, ns_id: int, id: str) -> tuple[int, str] | None:  # noqa: A002
        row = self.scope.ns(ns_id).one(
            "SELECT rowid, kind FROM entries WHERE ns_id = %s AND id = %s", (ns_id, id)
        )
        return None if row is None else (int(row[0]), str(row[1]))

    def find_many(self, ns_id: int, ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        rows = self.scope.ns(ns_id).rows(
            "SELECT id, rowid, kind FROM entries WHERE ns_id = %s AND id = ANY(%s)", (ns_id, list(ids))
        )
        return {str(r[0]): (int(r[1]), str(r[2])) for r in rows}

    def by_id(self, namespace: Namespace, id: str) -> EntryRecord | None:  # noqa: A002
        row = self.scope.tenant(namespace.tenant_id).one(
            f"SELECT {ENTRY_COLS} FROM entries WHERE tenant_id = %s AND project_id = %s AND id = %s",
            (namespace.tenant_id, namespace.project_id, id),
        )
        return None if row is None else _entry(row)

    def page(self, namespace: Namespace, *, limit: int, offset: int) -> list[EntryRecord]:
        rows = self.scope.tenant(namespace.tenant_id).rows(
            f"SELECT {ENTRY_COLS} FROM entries WHERE tenant_id = %s AND project_id = %s "
            "ORDER BY created_at, id LIMIT %s OFFSET %s",
            (namespace.tenant_id, namespace.project_id, limit, offset),
        )
        return [_entry(r) for r in rows]

    def texts(self, ns_id: int, ids: Sequence[str]) -> dict[str, str]:
        rows = self.scope.ns(ns_id).rows(
            "SELECT id, text FROM entries WHERE ns_id = %s AND id = ANY(%s)", (ns_id, list(ids))
        )
        return {str(r[0]): str(r[1]) for r in rows}

    def rows(self, ns_id: int, rowids: Sequence[int]) -> list[EntryRecord]:
        if not rowids:
            return []
        rows = self.scope.ns(ns_id).rows(
            f"SELECT {E_COLS}, d.terms FROM entries e LEFT JOIN docs d "
            "ON d.ns_id = e.ns_id AND d.corpus = 0 AND d.src_rowid = e.rowid "
            "WHERE e.ns_id = %s AND e.rowid = ANY(%s)",
            (ns_id, [int(r) for r in rowids]),
        )
        return [_entry(r, r[10]) for r in rows]

    def lexical(
        self, ns_id: int, terms: Sequence[str], *, types: Sequence[str] | None, limit: int
    ) -> list[EntryRecord]:
        if not terms or limit <= 0:
            return []
        stats = _index.stats(self.scope, ns_id, terms)
        where, params = "", _index.params(stats, terms, ns_id=ns_id, corpus=CORPUS_ENTRIES, limit=limit)
        if types is not None:
            where = " AND (e.memory_type = ANY(%(types)s) OR e.memory_type IS NULL)"
            params["types"] = list(types)
        rows = self.scope.rows(_index.candidates_sql(E_COLS, _index.ENTRY_JOIN, where), params)
        found = [(bm25_rank(r[10], terms, stats), int(r[0]), _entry(r, r[10])) for r in rows]
        found.sort(key=lambda f: (f[0], f[1]))
        return [record for _, _, record in found]

    def typed(self, ns_id: int, rowids: Sequence[int], types: Sequence[str]) -> set[int]:
        rows = self.scope.ns(ns_id).rows(
            "SELECT rowid FROM entries WHERE ns_id = %s AND rowid = ANY(%s) "
            "AND (memory_type = ANY(%s) OR memory_type IS NULL)",
            (ns_id, [int(r) for r in rowids], list(types)),
        )
        return {int(r[0]) for r in rows}

    def memory_types(self, ns_id: int, rowids: Sequence[int] | None) -> dict[int, str | None]:
        scope = self.scope.ns(ns_id)
        if rowids is None:
            rows = scope.rows("SELECT rowid, memory_type FROM entries WHERE ns_id = %s", (ns_id,))
        else:
            rows = scope.rows(
                "SELECT rowid, memory_type FROM entries WHERE ns_id = %s AND rowid = ANY(%s)",
                (ns_id, [int(r) for r in rowids]),
            )
        return {int(r): t for r, t in rows}

    def episodic_turns(self, ns_id: int, rowids: Sequence[int]) -> dict[int, bool]:
        rows = self.scope.ns(ns_id).rows(
            f"SELECT rowid, strpos(text, '?') > 0, kind, left(text, {TURN_HEAD_CHARS}) FROM entries "
            "WHERE ns_id = %s AND memory_type = 'episodic' AND rowid = ANY(%s)",
            (ns_id, [int(r) for r in rowids]),
        )
        return {int(r): bool(q) for r, q, kind, head in rows if is_turn(kind, head)}

    def insert(self, ns_id: int, namespace: Namespace, row: EntryRow) -> int:
        return self.insert_many(ns_id, namespace, [row])[0]

    def insert_many(self, ns_id: int, namespace: Namespace, rows: Sequence[EntryRow]) -> list[int]:
        """One statement for the batch (its columns as arrays); the rowids in the rows' order."""
        if not rows:
            return []
        if len(rows) == 1:  # a single note (the common write): the plain statement is cheaper
            created = self.scope.ns(ns_id).one(_INSERT_ENTRY, entry_values(ns_id, namespace, rows[0]))
            assert created is not None  # noqa: S101 - INSERT ... RETURNING returns its row
            return [int(created[0])]
        values = [entry_values(ns_id, namespace, row) for row in rows]
        columns = {name: [v[i] for v in values] for i, name in _ENTRY_ARRAYS}
        found = self.scope.ns(ns_id).rows(
            _INSERT_ENTRIES,
            {"ns": ns_id, "tenant": namespace.tenant_id, "project": namespace.project_id, **columns},
        )
        rowid_of = {str(r[1]): int(r[0]) for r in found}
        return [rowid_of[row.id] for row in rows]

    def update_text(self, ns_id: int, rowid: int, *, text: str, metadata: str) -> None:
        self.scope.ns(ns_id).execute(
            "UPDATE entries SET text = %s, metadata = %s WHERE rowid = %s AND ns_id = %s",
            (text, metadata, rowid, ns_id),
        )

    def delete(self, ns_id: int, rowid: int) -> None:
        _index.unindex(self.scope, ns_id, (CORPUS_ENTRIES, rowid))
        _index.delete_vectors(self.scope, CORPUS_ENTRIES, [rowid], ns_id=ns_id)
        self.scope.execute(
            "DELETE FROM neuron_triggers WHERE ns_id = %s AND entry_rowid = %s", (ns_id, rowid)
        )
        self.scope.execute(
            "DELETE FROM memorule_states WHERE ns_id = %s AND entry_rowid = %s", (ns_id, rowid)
        )
        self.scope.execute("DELETE FROM entries WHERE ns_id = %s AND rowid = %s", (ns_id, rowid))


@attrs.define(eq=False, slots=True)
class PostgresDocs:
    """`DocReads` and `DocWrites` over the document tables."""

    scope: Scope

    def find(self, table: str, ns_id: int, id: str) -> int | None:  # noqa: A002
        sql = f"SELECT rowid FROM {_doc_table(table)} WHERE ns_id = %s AND id = %s"
        row = self.scope.ns(ns_id).one(sql, (ns_id, id))
        return None if row is None else int(row[0])

    def find_many(self, table: str, ns_id: int, ids: Sequence[str]) -> dict[str, int]:
        sql = f"SELECT id, rowid FROM {_doc_table(table)} WHERE ns_id = %s AND id = ANY(%s)"
        return {str(r[0]): int(r[1]) for r in self.scope.ns(ns_id).rows(sql, (ns_id, list(ids)))}

    def rows(
        self, table: str, ns_id: int, rowids: Sequence[int], columns: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        cols = ", ".join(("rowid", "id", *columns))
        sql = f"SELECT {cols} FROM {_doc_table(table)} WHERE ns_id = %s AND rowid = ANY(%s)"
        return [tuple(r) for r in self.scope.ns(ns_id).rows(sql, (ns_id, [int(r) for r in rowids]))]

    def insert(self, table: str, ns_id: int, values: Mapping[str, Any]) -> int:
        return self.insert_many(table, ns_id, [values])[0]

    def insert_many(self, table: str, ns_id: int, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """One INSERT a row, pipelined (a run of rows with the same columns: one round trip)."""
        scope, rowids = self.scope.ns(ns_id), []
        for cols, run in itertools.groupby(rows, key=tuple):
            names, marks = ", ".join(cols), ", ".join(["%s"] * (len(cols) + 1))
            sql = f"INSERT INTO {_doc_table(table)} (ns_id, {names}) VALUES ({marks}) RETURNING rowid"
            found = scope.executemany_returning(sql, [[ns_id, *values.values()] for values in run])
            rowids += [int(r[0]) for r in found]
        return rowids

    def delete(self, table: str, ns_id: int, rowid: int) -> None:
        corpus = _DOC_CORPUS[_doc_table(table)]
        _index.unindex(self.scope, ns_id, (corpus, rowid))
        _index.delete_vectors(self.scope, corpus, [rowid], ns_id=ns_id)
        self.scope.execute(f"DELETE FROM {table} WHERE ns_id = %s AND rowid = %s", (ns_id, rowid))


@attrs.define(eq=False, slots=True)
class PostgresNeurons:
    """`NeuronReads` and `NeuronWrites` over `neuron_triggers` and the neurons' entries."""

    scope: Scope

    def find(self, ns_id: int, id: str) -> int | None:  # noqa: A002
        row = self.scope.ns(ns_id).one(
            "SELECT rowid FROM entries WHERE ns_id = %s AND id = %s AND kind = 'neuron'", (ns_id, id)
        )
        return None if row is None else int(row[0])

    def matching(self, ns_id: int, terms: Sequence[str]) -> list[tuple[int, str]]:
        rows = self.scope.ns(ns_id).rows(
            "SELECT DISTINCT entry_rowid, term FROM neuron_triggers WHERE ns_id = %s AND term = ANY(%s)",
            (ns_id, list(terms)),
        )
        return sorted((int(r[0]), str(r[1])) for r in rows)

    def triggers(self, ns_id: int, rowids: Sequence[int]) -> list[tuple[int, str]]:
        rows = self.scope.ns(ns_id).rows(
            "SELECT entry_rowid, term FROM neuron_triggers "
            "WHERE ns_id = %s AND entry_rowid = ANY(%s) ORDER BY seq",
            (ns_id, [int(r) for r in rowids]),
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    def rows(self, ns_id: int, rowids: Sequence[int], types: Sequence[str] | None) -> list[NeuronRecord]:
        typed, params = "", [ns_id, [int(r) for r in rowids]]
        if types is not None:
            typed = " AND (memory_type = ANY(%s) OR memory_type IS NULL)"
            params.append(list(types))
        rows = self.scope.ns(ns_id).rows(
            f"SELECT {_NEURON_COLS} FROM entries WHERE ns_id = %s AND kind = 'neuron' AND rowid = ANY(%s)"
            f"{typed} ORDER BY rowid",
            params,
        )
        return [NeuronRecord(*r) for r in rows]

    def add_triggers(self, ns_id: int, rowid: int, terms: Sequence[str]) -> None:
        self.scope.ns(ns_id).execute(
            "INSERT INTO neuron_triggers (ns_id, term, entry_rowid) "
            "SELECT %s, t, %s FROM unnest(%s::text[]) t",
            (ns_id, rowid, list(terms)),
        )
