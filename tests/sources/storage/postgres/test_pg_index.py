"""PostgreSQL's lexical index written in batches (`sources.storage._postgres._index.index_many`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from pg_server import require

from broker import Namespace
from sources.storage import _analysis
from sources.storage._engine import CORPUS_ENTRIES
from sources.storage._postgres._engine import PostgresEngine

if TYPE_CHECKING:
    from collections.abc import Iterator

require("psycopg")

TEXTS = [
    "The train to Lyon was delayed forty minutes, the train after it too.",
    "Tomatoes and basil on the balcony; basil again in the kitchen.",
    "Piano scales every Thursday with the lighthouse keeper.",
    "The database migration to postgres 2026 v2 needs an index.",
    "Coffee, rice and beans from the groceries.",
]


@pytest.fixture
def engine(pg_url: str) -> Iterator[PostgresEngine]:
    """A PostgresEngine on a fresh database."""
    eng = PostgresEngine.open(pg_url, connections=2)
    yield eng
    eng.close()


def test_a_batch_indexes_exactly_as_one_document_at_a_time(engine: PostgresEngine) -> None:
    """`index_documents` (one statement a corpus, terms sent space-joined) leaves the same
    statistics, postings and document terms as `index_document` of each: repeated and accented
    terms, a document without terms, two corpora."""
    texts = [*TEXTS, "", "the a of", "café café Zürich naïve résumé v2 2026"]
    docs = [((CORPUS_ENTRIES + i % 2, 10 + i), _analysis.terms(text)) for i, text in enumerate(texts)]
    one, many = (
        Namespace(tenant_id="alice", project_id="one"),
        Namespace(tenant_id="alice", project_id="many"),
    )
    with engine.write() as w:
        one_id, many_id = w.ensure_namespace(one), w.ensure_namespace(many)
        for key, terms in docs:
            w.index_document(one_id, key, terms)
        w.index_documents(many_id, docs)
    every = sorted({t for _, terms in docs for t in terms})
    keys = [key for key, _ in docs]
    with engine.read() as r:
        a, b = r.term_stats(one_id, every), r.term_stats(many_id, every)
        assert (a.n_docs, a.total_len, a.df) == (b.n_docs, b.total_len, b.df)
        assert r.indexed_terms(one_id, keys) == r.indexed_terms(many_id, keys)
        for corpus_id in (CORPUS_ENTRIES, CORPUS_ENTRIES + 1):
            hits = [r.lexical_candidates(ns, every, corpus=corpus_id, limit=100) for ns in (one_id, many_id)]
            assert [(h.rowid, h.rank, h.terms) for h in hits[0]] == [
                (h.rowid, h.rank, h.terms) for h in hits[1]
            ]
            assert hits[0]
