"""The memory store: namespaced, typed entries in one SQLite file, with calibrated recall."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import structlog

from broker import MEMORY_TYPES, RECALL_MIN_SCORE, FieldError, Namespace, ValidationError

from . import _analysis, _index, _schema, _validate
from ._db import Database
from ._relevance import QueryProfile, lexical_features, lexical_probability

logger = structlog.get_logger(__name__)

MAX_RECALL_LIMIT = 1000
_ENTRY_COLS = "rowid, id, tenant_id, project_id, kind, memory_type, text, created_at, importance, metadata"


@attrs.frozen(kw_only=True)
class Memory:
    """A stored memory."""

    id: str
    namespace: Namespace
    kind: str
    memory_type: str | None
    text: str
    created_at: str
    importance: float
    metadata: Mapping[str, Any] = attrs.field(factory=dict, eq=False)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Memory:
        """Build from a row selected with the store's entry columns."""
        return cls(
            id=row[1],
            namespace=Namespace(tenant_id=row[2], project_id=row[3]),
            kind=row[4],
            memory_type=row[5],
            text=row[6],
            created_at=row[7],
            importance=float(row[8]),
            metadata=_validate.decode_metadata(row[9]),
        )


@attrs.frozen(kw_only=True)
class Recalled:
    """A memory that cleared the floor, with its calibrated probability of relevance."""

    memory: Memory
    score: float


@attrs.frozen(kw_only=True)
class NewEntry:
    """One memory to write; validated as a whole before anything is written."""

    text: str
    kind: str = "note"
    memory_type: str | None = None
    id: str | None = None
    importance: float = 0.5
    created_at: str | None = None
    metadata: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class _Row:
    id: str
    kind: str
    memory_type: str | None
    text: str
    created_at: str
    importance: float
    metadata: str


def _checked(entry: NewEntry, prefix: str = "") -> tuple[_Row | None, list[FieldError]]:
    errors = _validate.text_errors(f"{prefix}text", entry.text)
    errors += _validate.choice_errors(f"{prefix}kind", entry.kind, _validate.KINDS, optional=False)
    errors += _validate.choice_errors(f"{prefix}memory_type", entry.memory_type, MEMORY_TYPES, optional=True)
    errors += _validate.id_errors(f"{prefix}id", entry.id)
    errors += _validate.importance_errors(entry.importance)
    created, errs = _validate.normalise_created_at(entry.created_at)
    errors += errs
    metadata, errs = _validate.encode_metadata(entry.metadata)
    errors += errs
    if errors or created is None:
        return None, errors
    return (
        _Row(
            id=entry.id or str(uuid.uuid4()),
            kind=entry.kind,
            memory_type=entry.memory_type,
            text=entry.text,
            created_at=created,
            importance=float(entry.importance),
            metadata=metadata,
        ),
        [],
    )


def types_errors(types: Iterable[str] | None) -> list[FieldError]:
    """Unknown memory types in a typed query."""
    if types is None:
        return []
    return [
        FieldError(field="types", code="invalid_choice", message=f"unknown memory type {t!r}")
        for t in types
        if t not in MEMORY_TYPES
    ]


@attrs.define(eq=False)
class MemoryStore:
    """Namespaced memories in one SQLite file. Blocking and thread-safe: async callers
    run its methods in worker threads."""

    db: Database

    @classmethod
    def open(cls, path: Path | str) -> MemoryStore:
        """Open (or create) the store at `path`; StoreError if the file is unusable."""
        return cls(db=Database.open(path))

    def close(self) -> None:
        """Close every connection."""
        self.db.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -------------------------------------------------------------------------

    def add_entry(
        self,
        text: str,
        *,
        namespace: Namespace,
        kind: str = "note",
        memory_type: str | None = None,
        id: str | None = None,  # noqa: A002 - the documented API name
        importance: float = 0.5,
        created_at: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> str:
        """Write one memory; returns its id. An existing id is an error unless `replace`."""
        entry = NewEntry(
            text=text,
            kind=kind,
            memory_type=memory_type,
            id=id,
            importance=importance,
            created_at=created_at,
            metadata=metadata,
        )
        return self.add_entries([entry], namespace=namespace, replace=replace)[0]

    def add_entries(
        self, entries: Iterable[NewEntry], *, namespace: Namespace, replace: bool = False
    ) -> list[str]:
        """Write many memories in one transaction: all or nothing."""
        rows = self._validated(list(entries))
        with self.db.write() as conn:
            ns_id = _index.ensure_ns(conn, namespace)
            for row in rows:
                self._insert(conn, ns_id, namespace, row, replace=replace)
        return [r.id for r in rows]

    def _validated(self, entries: list[NewEntry]) -> list[_Row]:
        rows: list[_Row] = []
        errors: list[FieldError] = []
        many = len(entries) > 1
        seen: set[str] = set()
        for i, entry in enumerate(entries):
            row, errs = _checked(entry, f"[{i}]." if many else "")
            errors += errs
            if row is not None:
                if row.id in seen:
                    errors.append(FieldError(field=f"[{i}].id", code="duplicate", message=f"id {row.id!r} repeats in this batch"))
                seen.add(row.id)
                rows.append(row)
        _validate.raise_if(errors)
        return rows

    def _insert(self, conn: sqlite3.Connection, ns_id: int, ns: Namespace, row: _Row, *, replace: bool) -> int:
        old = conn.execute("SELECT rowid FROM entries WHERE ns_id = ? AND id = ?", (ns_id, row.id)).fetchone()
        if old is not None:
            if not replace:
                raise ValidationError.single("id", "exists", f"id {row.id!r} already exists in {ns}")
            self._delete_rowid(conn, ns_id, int(old[0]))
        cur = conn.execute(
            "INSERT INTO entries (id, ns_id, tenant_id, project_id, kind, memory_type, text, "
            "created_at, importance, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row.id, ns_id, ns.tenant_id, ns.project_id, row.kind, row.memory_type, row.text,
             row.created_at, row.importance, row.metadata),
        )
        rowid = int(cur.lastrowid or 0)
        _index.add_doc(conn, ns_id, _schema.CORPUS_ENTRIES, rowid, row.text)
        return rowid

    def delete(self, id: str, *, namespace: Namespace) -> bool:  # noqa: A002
        """Remove a memory from every index; returns whether it existed."""
        with self.db.write() as conn:
            ns_id = _index.find_ns(conn, namespace)
            if ns_id is None:
                return False
            row = conn.execute("SELECT rowid FROM entries WHERE ns_id = ? AND id = ?", (ns_id, id)).fetchone()
            if row is None:
                return False
            self._delete_rowid(conn, ns_id, int(row[0]))
        return True

    @staticmethod
    def _delete_rowid(conn: sqlite3.Connection, ns_id: int, rowid: int) -> None:
        _index.remove_doc(conn, ns_id, _schema.CORPUS_ENTRIES, rowid)
        conn.execute("DELETE FROM vectors WHERE corpus = ? AND src_rowid = ?", (_schema.CORPUS_ENTRIES, rowid))
        conn.execute("DELETE FROM neuron_triggers WHERE entry_rowid = ?", (rowid,))
        conn.execute("DELETE FROM memorule_states WHERE entry_rowid = ?", (rowid,))
        conn.execute("DELETE FROM entries WHERE rowid = ?", (rowid,))

    # -- reads --------------------------------------------------------------------------

    def get(self, id: str, *, namespace: Namespace) -> Memory | None:  # noqa: A002
        """The memory with this id in this namespace, or None."""
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE tenant_id = ? AND project_id = ? AND id = ?",  # noqa: S608
                (namespace.tenant_id, namespace.project_id, id),
            ).fetchone()
        return None if row is None else Memory.from_row(row)

    def recall(
        self,
        query: str,
        *,
        namespace: Namespace,
        types: Sequence[str] | None = None,
        limit: int = 10,
        min_score: float = RECALL_MIN_SCORE,
    ) -> list[Recalled]:
        """Memories relevant to `query`, best first, each with a calibrated probability of
        relevance at or above `min_score`. Typed queries include unclassified memories."""
        with self.db.read() as conn:
            return self.recall_on(conn, query, namespace=namespace, types=types, limit=limit, min_score=min_score)

    def recall_on(
        self,
        conn: sqlite3.Connection,
        query: str,
        *,
        namespace: Namespace,
        types: Sequence[str] | None = None,
        limit: int = 10,
        min_score: float = RECALL_MIN_SCORE,
    ) -> list[Recalled]:
        """`recall` on a reader connection the caller holds (so it can interrupt it)."""
        self._check_recall_args(query, types, limit)
        ns_id = _index.find_ns(conn, namespace)
        prof = _index.profile(conn, ns_id, query)
        if ns_id is None or not prof.present:
            return []
        rows = self._lexical_rows(conn, ns_id, prof, types, max(4 * limit, 50))
        scored = [Recalled(memory=Memory.from_row(r), score=_score_text(prof, r[6])) for r in rows]
        kept = [r for r in scored if r.score >= min_score]
        kept.sort(key=lambda r: (-r.score, r.memory.id))
        return kept[:limit]

    @staticmethod
    def _check_recall_args(query: object, types: Sequence[str] | None, limit: object) -> None:
        errors = _validate.text_errors("query", query)
        errors += types_errors(types)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RECALL_LIMIT:
            errors.append(FieldError(field="limit", code="out_of_range", message=f"must be an integer in 1..{MAX_RECALL_LIMIT}"))
        _validate.raise_if(errors)

    @staticmethod
    def _lexical_rows(
        conn: sqlite3.Connection, ns_id: int, prof: QueryProfile, types: Sequence[str] | None, k: int
    ) -> list[Any]:
        table = _schema.fts_table(ns_id)
        match = _analysis.fts_query(tuple(sorted(prof.present)))
        typed = ""
        params: list[Any] = [match]
        if types is not None:
            typed = f" AND (e.memory_type IN ({','.join('?' * len(types))}) OR e.memory_type IS NULL)"
            params += list(types)
        params.append(k)
        cols = ", ".join(f"e.{c.strip()}" for c in _ENTRY_COLS.split(","))
        return conn.execute(
            f"SELECT {cols} FROM {table} JOIN entries e ON e.rowid = ({table}.rowid >> 2) "  # noqa: S608
            f"WHERE {table} MATCH ? AND ({table}.rowid & 3) = 0{typed} ORDER BY bm25({table}) LIMIT ?",
            params,
        ).fetchall()

    def stats(self, *, namespace: Namespace | None = None) -> dict[str, Any]:
        """Counts per namespace and kind, schema version, file size."""
        with self.db.read() as conn:
            where, params = "", ()
            if namespace is not None:
                where, params = " WHERE tenant_id = ? AND project_id = ?", (namespace.tenant_id, namespace.project_id)
            kinds = conn.execute(
                f"SELECT tenant_id, project_id, kind, COALESCE(memory_type, ''), count(*) FROM entries{where} "  # noqa: S608
                "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
                params,
            ).fetchall()
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        total = sum(int(r[4]) for r in kinds)
        return {
            "path": str(self.db.path),
            "schema_version": int(version),
            "entries": total,
            "by_namespace": [
                {"tenant": r[0], "project": r[1], "kind": r[2], "memory_type": r[3] or None, "count": int(r[4])}
                for r in kinds
            ],
            "size_bytes": self.db.size_bytes(),
        }


def _score_text(prof: QueryProfile, text: str) -> float:
    return lexical_probability(lexical_features(prof, _analysis.terms(text)))
