"""The store's upkeep and counts: re-embedding stale vectors (`MemoryStore.reindex`), vector
states and per-namespace statistics. Blocking; `MemoryStore` calls these."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

from . import _schema, _vectors
from ._vectors import Slot

if TYPE_CHECKING:
    from broker import Namespace
    from broker.abc import Embedder

    from ._db import Database

CORPUS_TABLES: Final = {
    _schema.CORPUS_ENTRIES: "entries",
    _schema.CORPUS_FACTS: "facts",
    _schema.CORPUS_KNOWLEDGE: "knowledge",
}
"""Each corpus with vectors and its table."""


def unembedded(db: Database, model_id: str) -> dict[int, list[int]]:
    """Rowids of each corpus whose vector is missing or made by another model."""
    out: dict[int, list[int]] = {}
    with db.read() as conn:
        for corpus, table in CORPUS_TABLES.items():
            out[corpus] = [
                int(r[0])
                for r in conn.execute(
                    f"SELECT t.rowid FROM {table} t LEFT JOIN vectors v "
                    "ON v.corpus = ? AND v.src_rowid = t.rowid "
                    "WHERE v.model_id IS NULL OR v.model_id != ? ORDER BY t.rowid",
                    (corpus, model_id),
                )
            ]
    return out


def reindex_batch(db: Database, embedder: Embedder, corpus: int, rowids: list[int]) -> int:
    """Embed a batch of rows outside the write lock, then store the vectors of those not
    deleted or changed meanwhile; return how many were stored."""
    table = CORPUS_TABLES[corpus]
    marks = ",".join("?" * len(rowids))
    sql = f"SELECT rowid, ns_id, text FROM {table} WHERE rowid IN ({marks})"
    with db.read() as conn:
        rows = [(int(r[0]), int(r[1]), str(r[2])) for r in conn.execute(sql, rowids)]
    if not rows:
        return 0
    vectors = embedder.embed([r[2] for r in rows])
    written = 0
    with db.write() as conn:
        for (rowid, ns_id, text), vec in zip(rows, vectors, strict=True):
            still = conn.execute(
                f"SELECT 1 FROM {table} WHERE rowid = ? AND ns_id = ? AND text = ?",
                (rowid, ns_id, text),
            ).fetchone()
            if still is not None:
                _vectors.store_vectors(conn, Slot(ns_id, corpus), [rowid], vec[None, :], embedder.model_id)
                written += 1
    return written


def vector_status(db: Database, model_id: str, namespace: Namespace | None) -> dict[str, int]:
    """Count entries by vector state.

    `current`: a vector of this store's model; `stale`: of another model; `missing`: none.
    """
    where, params = "", cast("tuple[str, ...]", ())
    if namespace is not None:
        where, params = (
            " WHERE e.tenant_id = ? AND e.project_id = ?",
            (namespace.tenant_id, namespace.project_id),
        )
    with db.read() as conn:
        row = conn.execute(
            "SELECT total(v.model_id = ?), total(v.model_id != ?), total(v.model_id IS NULL) "
            f"FROM entries e LEFT JOIN vectors v ON v.corpus = 0 AND v.src_rowid = e.rowid{where}",
            (model_id, model_id, *params),
        ).fetchone()
    return {"current": int(row[0]), "stale": int(row[1]), "missing": int(row[2])}


def stats(db: Database, namespace: Namespace | None) -> dict[str, Any]:
    """Return counts per namespace and kind, schema version, file size."""
    with db.read() as conn:
        where, params = "", cast("tuple[str, ...]", ())
        if namespace is not None:
            where, params = (
                " WHERE tenant_id = ? AND project_id = ?",
                (namespace.tenant_id, namespace.project_id),
            )
        kinds = conn.execute(
            "SELECT tenant_id, project_id, kind, COALESCE(memory_type, ''), count(*) "
            f"FROM entries{where} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
            params,
        ).fetchall()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    total = sum(int(r[4]) for r in kinds)
    return {
        "path": str(db.path),
        "schema_version": int(version),
        "entries": total,
        "by_namespace": [
            {
                "tenant": r[0],
                "project": r[1],
                "kind": r[2],
                "memory_type": r[3] or None,
                "count": int(r[4]),
            }
            for r in kinds
        ],
        "size_bytes": db.size_bytes(),
    }
