"""The text index every corpus shares (entries, facts, knowledge), above the engine: texts
are analysed here (`sources._analysis`), so every engine indexes and counts the same terms,
and a query is profiled against the namespace's statistics (`QueryProfile`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _analysis
from ._relevance import QueryProfile

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._engine import Reader, Writer
    from ._postings import TextIndex


def add_doc(writer: Writer, ns_id: int, corpus: int, rowid: int, text: str) -> None:
    """Index one document under its analysed terms and count it in the namespace's statistics."""
    writer.index_document(ns_id, (corpus, rowid), _analysis.terms(text))


def add_docs(writer: Writer, ns_id: int, corpus: int, docs: Iterable[tuple[int, str]]) -> None:
    """`add_doc` of each (rowid, text) of one corpus, in one batch."""
    writer.index_documents(ns_id, [((corpus, rowid), _analysis.terms(text)) for rowid, text in docs])


def remove_doc(writer: Writer, ns_id: int, corpus: int, rowid: int) -> None:
    """Remove one document from the index and the statistics."""
    writer.unindex_document(ns_id, (corpus, rowid))


def profile(reader: Reader, ns_id: int | None, query: str, texts: TextIndex | None = None) -> QueryProfile:
    """Profile a query against a namespace's statistics (empty namespace: no statistics); the
    terms' document frequencies from the in-memory text index when it is current (`texts`),
    the same counts the engine keeps."""
    qterms = _analysis.query_terms(query)
    if ns_id is None or not qterms:
        return QueryProfile.build(qterms, n_docs=0, total_len=0, df={})
    df = None if texts is None else texts.document_frequencies(reader, ns_id, qterms)
    stats = reader.term_stats(ns_id, qterms if df is None else ())
    return QueryProfile.build(
        qterms,
        n_docs=stats.n_docs,
        total_len=stats.total_len,
        df=stats.df if df is None else df,
        generation=stats.generation,
    )
