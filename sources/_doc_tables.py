"""Documents of the shared text index (facts, knowledge): written with their index terms
and vectors in one write, deleted by id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from broker import Namespace

from .storage import _index, _validate
from .storage._engine import Slot

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from ._store import MemoryStore


_EMBED_BATCH = 64


@attrs.frozen
class DocTable:
    """A document table and the corpus its texts are indexed under (facts, knowledge)."""

    table: str
    corpus: int


def insert_docs(
    store: MemoryStore,
    namespace: Namespace,
    docs: DocTable,
    rows: Sequence[Mapping[str, Any]],
    *,
    replace: bool,
) -> None:
    """Insert validated rows (each with `id` and `text`) of a document table in one write.

    Each text is indexed in the namespace's FTS under `corpus` (statistics included), and
    with an embedder its vector is stored too, embedded before the write lock is taken.
    The table and the column names are fixed by the calling module, never user input.
    """
    table, corpus = docs.table, docs.corpus
    if not rows:  # no write, no namespace created
        return
    vectors = embedded(store, [str(r["text"]) for r in rows])
    with store.engine.write() as conn:
        ns_id = conn.ensure_namespace(namespace)
        ids = [str(row["id"]) for row in rows]
        old = conn.docs.find_many(table, ns_id, ids)
        if not replace:
            _validate.raise_if(_validate.exists_errors([i for i in ids if i in old], namespace))
        for rowid in old.values():
            conn.docs.delete(table, ns_id, rowid)
        rowids = conn.docs.insert_many(table, ns_id, rows)
        _index.add_docs(conn, ns_id, corpus, zip(rowids, (str(row["text"]) for row in rows), strict=True))
        if vectors is not None and store.embedder is not None:
            conn.store_vectors(Slot(ns_id, corpus), rowids, vectors, store.embedder.model_id)


def embedded(store: MemoryStore, texts: list[str]) -> npt.NDArray[np.float32] | None:
    """The texts' vectors in batches (before any write lock is taken); None without an embedder."""
    if store.embedder is None or not texts:
        return None
    embedder = store.embedder
    return np.concatenate(
        [embedder.embed(texts[i : i + _EMBED_BATCH]) for i in range(0, len(texts), _EMBED_BATCH)]
    )


def delete_doc_by_id(store: MemoryStore, namespace: Namespace, id_: str, *, table: str) -> bool:
    """Delete the document `id_` of a table in one write; return whether it existed."""
    with store.engine.write() as conn:
        ns_id = conn.namespace_id(namespace)
        rowid = None if ns_id is None else conn.docs.find(table, ns_id, id_)
        if ns_id is None or rowid is None:
            return False
        conn.docs.delete(table, ns_id, rowid)
    return True
