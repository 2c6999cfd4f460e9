"""Vectors written inside a source's own write: embedded by the store's checks
(`sources.embedding._checked`), stored through the engine's writer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .embedding._checked import checked as checked_embedder

if TYPE_CHECKING:
    from collections.abc import Sequence

    from broker.abc import Embedder

    from .storage._engine import Slot, Writer


def embed_and_store_vectors(
    writer: Writer, slot: Slot, rowids: Sequence[int], texts: Sequence[str], *, embedder: Embedder
) -> None:
    """Embed texts and store their vectors in the caller's write (`Writer.store_vectors`),
    checked as the store checks its own embedder's (`sources.embedding._checked`: EmbedderError).

    For sources that write inside their own transaction. Embedding holds the write lock
    meanwhile (about 1.3 ms a text); embed first and call `Writer.store_vectors` to avoid that.
    """
    vectors = checked_embedder(embedder).embed(list(texts))
    writer.store_vectors(slot, rowids, vectors, embedder.model_id)
