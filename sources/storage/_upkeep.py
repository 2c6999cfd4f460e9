"""The store's upkeep and counts: re-embedding stale vectors (`MemoryStore.reindex`), vector
states and per-namespace statistics. Blocking; `MemoryStore` calls these."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._engine import CORPORA, Slot

if TYPE_CHECKING:
    from broker import Namespace
    from broker.abc import Embedder

    from ._engine import Engine


def unembedded(engine: Engine, model_id: str, dim: int) -> dict[int, list[int]]:
    """Rowids of each corpus whose vector is missing, made by another model, or damaged (not
    `dim` values long)."""
    with engine.read() as conn:
        return {corpus: conn.unembedded(corpus, model_id, dim) for corpus in CORPORA}


def reindex_batch(engine: Engine, embedder: Embedder, corpus: int, rowids: list[int]) -> int:
    """Embed a batch of rows outside the write lock, then store the vectors of those not
    deleted or changed meanwhile; return how many were stored."""
    with engine.read() as conn:
        rows = conn.corpus_texts(corpus, rowids)
    if not rows:
        return 0
    vectors = embedder.embed([r[2] for r in rows])
    written = 0
    with engine.write() as conn:
        for (rowid, ns_id, text), vec in zip(rows, vectors, strict=True):
            if conn.is_current(corpus, rowid, ns_id, text):
                conn.store_vectors(Slot(ns_id, corpus), [rowid], vec[None, :], embedder.model_id)
                written += 1
    return written


def vector_status(engine: Engine, model_id: str, dim: int, namespace: Namespace | None) -> dict[str, int]:
    """Count entries by vector state.

    `current`: a vector of this store's model, `dim` values long; `stale`: of another model or
    length; `missing`: none.
    """
    with engine.read() as conn:
        counts = conn.vector_counts(model_id, dim, namespace)
    return {"current": counts.current, "stale": counts.stale, "missing": counts.missing}


def stats(engine: Engine, namespace: Namespace | None) -> dict[str, Any]:
    """Return counts per namespace and kind (entries; the facts, knowledge, graph nodes and edges
    and tasks as `records`), schema version, file size."""
    with engine.read() as conn:
        kinds = conn.kind_counts(namespace)
        records = conn.record_counts(namespace)
    total = sum(k.entries for k in kinds)
    return {
        "path": engine.location,
        "schema_version": engine.schema_version(),
        "entries": total,
        "by_namespace": [
            {
                "tenant": k.tenant_id,
                "project": k.project_id,
                "kind": k.kind,
                "memory_type": k.memory_type or None,
                "count": k.entries,
            }
            for k in kinds
        ],
        "records": [
            {"tenant": r.tenant_id, "project": r.project_id, "kind": r.kind, "count": r.records}
            for r in records
        ],
        "size_bytes": engine.size_bytes(),
    }
