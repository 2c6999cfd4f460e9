"""The text index every corpus shares (entries, facts, knowledge), above the engine: texts
are analysed here (`sources.storage._analysis`), so every engine indexes and counts the same
terms (a query is profiled against those statistics by `sources.relevance._relevance.profile`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _analysis

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._engine import Writer


def add_doc(writer: Writer, ns_id: int, corpus: int, rowid: int, text: str) -> None:
    """Index one document under its analysed terms and count it in the namespace's statistics."""
    writer.index_document(ns_id, (corpus, rowid), _analysis.terms(text))


def add_docs(writer: Writer, ns_id: int, corpus: int, docs: Iterable[tuple[int, str]]) -> None:
    """`add_doc` of each (rowid, text) of one corpus, in one batch."""
    writer.index_documents(ns_id, [((corpus, rowid), _analysis.terms(text)) for rowid, text in docs])


def remove_doc(writer: Writer, ns_id: int, corpus: int, rowid: int) -> None:
    """Remove one document from the index and the statistics."""
    writer.unindex_document(ns_id, (corpus, rowid))
