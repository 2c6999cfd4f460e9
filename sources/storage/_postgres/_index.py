"""The lexical index of a namespace in PostgreSQL: documents' terms, the namespace's term
statistics kept by the writers, and the candidates of a query.

Candidates. The postings of the query's terms (an index range per term, as FTS5 reads its
own) give each matching document's BM25, computed in SQL from the project's own statistics
(`namespaces.n_docs`, `total_len`, `term_stats.df`), so the database orders and cuts them;
the rank the hits carry is then `sources.storage._engine.bm25_rank` itself, computed in Python on
the same statistics: the value SQLite's FTS5 gives, not a look-alike.

Statistics. Indexing a document adds 1 to the namespace's `n_docs`, its term count to
`total_len` and 1 to the `df` of each distinct term; unindexing undoes exactly that, from
the terms stored with the document. The writer holds the namespace's lock (`Scope.lock_ns`)
throughout, so two writers never interleave their updates of one namespace's statistics.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from sources.storage._engine import BM25_B, BM25_K1, BM25_MIN_IDF, TermStats, bm25_rank
from sources.storage._read_once import read_once
from sources.storage._runs import LexicalHit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._sql import Scope

# Each matching document's BM25, from the postings of the query's terms `q(term, idf)`. The
# lateral joins pin the plan to one index range per term and one index probe per document
# read, whatever the planner's statistics say (a freshly loaded table has none, and with
# them missing it scanned the namespace's every posting: 140 ms instead of 3 at 10k).
_SCORES: Final = (
    "SELECT p.src_rowid, "
    "sum(q.idf * p.tf * %(k1p1)s / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.n_terms / %(avgdl)s))) AS score "
    "FROM unnest(%(terms)s::text[], %(idfs)s::float8[]) AS q(term, idf) "
    "CROSS JOIN LATERAL (SELECT src_rowid, tf, n_terms FROM postings "
    "WHERE ns_id = %(ns)s::bigint AND corpus = %(corpus)s::smallint AND term = q.term OFFSET 0) AS p "
    "GROUP BY p.src_rowid"
)
_BEST: Final = " ORDER BY score DESC, src_rowid LIMIT %(limit)s"
_DOC: Final = (
    " CROSS JOIN LATERAL (SELECT * FROM docs "
    "WHERE ns_id = %(ns)s::bigint AND corpus = %(corpus)s::smallint AND src_rowid = top.src_rowid "
    "OFFSET 0) AS d"
)
ENTRY_JOIN: Final = " JOIN entries e ON e.rowid = d.src_rowid AND e.ns_id = d.ns_id"
"""Join a corpus-0 candidate `d` to its entry `e`."""


def candidates_sql(select: str, joins: str = "", where: str = "") -> str:
    """The candidates of one corpus, best BM25 first, then rowid: `select` columns (of `d`,
    the document, and the joined tables), then `d.terms`, then the score.

    Without a filter the best `limit` are chosen among the scores alone, and only their
    documents are read; a filter (`joins`, `where`: typed entries, memorules) applies
    before the limit, so every match is joined first.
    """
    inner = _SCORES if where or joins else _SCORES + _BEST
    return (
        f"SELECT {select}, d.terms, top.score FROM ({inner}) AS top{_DOC}"
        f"{joins} WHERE true{where} ORDER BY top.score DESC, top.src_rowid LIMIT %(limit)s"
    )


def params(
    stats: TermStats, terms: Sequence[str], *, ns_id: int, corpus: int, limit: int
) -> dict[str, object]:
    """The parameters of `candidates_sql`: each term's IDF as `bm25_rank` computes it."""
    uniq = list(dict.fromkeys(terms))
    n = stats.n_docs
    idfs = [
        max(math.log((n - stats.df.get(t, 0) + 0.5) / (stats.df.get(t, 0) + 0.5)), BM25_MIN_IDF) for t in uniq
    ]
    return {
        "terms": uniq,
        "idfs": idfs,
        "avgdl": stats.total_len / n if n else 1.0,
        "k1": BM25_K1,
        "k1p1": BM25_K1 + 1,
        "b": BM25_B,
        "ns": ns_id,
        "corpus": corpus,
        "limit": limit,
    }


def stats(scope: Scope, ns_id: int, terms: Sequence[str]) -> TermStats:
    """The namespace's `TermStats` for `terms` (zeros for an unknown namespace); a read
    keeps them for its snapshot, a write reads them afresh."""
    asked = frozenset(terms)
    return read_once(scope.snapshot, ("stats", ns_id, asked), lambda: _stats(scope, ns_id, asked))


def _stats(scope: Scope, ns_id: int, terms: frozenset[str]) -> TermStats:
    row = scope.ns(ns_id).one(
        "SELECT n_docs, total_len, generation FROM namespaces WHERE ns_id = %s", (ns_id,)
    )
    if row is None:
        return TermStats(n_docs=0, total_len=0, df={})
    df = {
        str(term): int(doc)
        for term, doc in scope.rows(
            "SELECT term, df FROM term_stats WHERE ns_id = %s AND term = ANY(%s) AND df > 0",
            (ns_id, sorted(terms)),
        )
    }
    return TermStats(n_docs=int(row[0]), total_len=int(row[1]), df=df, generation=int(row[2]))


def candidates(
    scope: Scope, ns_id: int, terms: Sequence[str], *, corpus: int, limit: int
) -> list[LexicalHit]:
    """The `limit` best documents of one corpus holding any of `terms`, by rank then rowid."""
    if not terms or limit <= 0:
        return []
    found = stats(scope, ns_id, terms)
    rows = scope.rows(
        candidates_sql("d.src_rowid"), params(found, terms, ns_id=ns_id, corpus=corpus, limit=limit)
    )
    hits = [LexicalHit(int(r[0]), bm25_rank(r[1], terms, found), tuple(r[1])) for r in rows]
    hits.sort(key=lambda h: (h.rank, h.rowid))
    return hits


# One statement, one round trip, for a batch of documents (data-modifying CTEs all run, in one
# snapshot).
_INDEX: Final = (
    "WITH flat AS (SELECT d.r, f.p, f.t, d.n FROM unnest(%(d_rowid)s::bigint[], %(d_body)s::text[], "
    "%(d_n)s::integer[]) AS d(r, body, n) CROSS JOIN LATERAL unnest(string_to_array(d.body, ' ')) "
    "WITH ORDINALITY AS f(t, p)), "
    "doc AS (INSERT INTO docs (ns_id, corpus, src_rowid, terms, n_terms) "
    "SELECT %(ns)s, %(corpus)s, r, array_agg(t ORDER BY p), max(n) FROM flat GROUP BY r "
    "UNION ALL SELECT %(ns)s, %(corpus)s, e, '{}'::text[], 0 FROM unnest(%(empty)s::bigint[]) AS e), "
    "post AS (INSERT INTO postings (ns_id, corpus, term, src_rowid, tf, n_terms) "
    "SELECT %(ns)s, %(corpus)s, t, r, count(*), max(n) FROM flat GROUP BY t, r ORDER BY t, r), "
    "tot AS (UPDATE namespaces SET n_docs = n_docs + %(docs)s, total_len = total_len + %(total)s "
    "WHERE ns_id = %(ns)s), "
    "log AS (INSERT INTO text_log (ns_id, corpus, src_rowid, op) "
    "SELECT %(ns)s, %(corpus)s, l.r, 1 FROM unnest(%(rowid)s::bigint[]) WITH ORDINALITY AS l(r, o) "
    "ORDER BY l.o) "
    "INSERT INTO term_stats (ns_id, term, df) SELECT %(ns)s, t, count(DISTINCT r) FROM flat GROUP BY t "
    "ON CONFLICT (ns_id, term) DO UPDATE SET df = term_stats.df + EXCLUDED.df"
)
"""Index a batch of documents of one corpus in one statement: each document's terms as one
space-joined text (an analysed term holds no space), split into (document, position, term) by
the server; the documents, their postings (inserted in key order), the log, the namespace's
totals and each term's document frequency, each table written once."""


_INDEX_ONE: Final = (
    "WITH doc AS (INSERT INTO docs (ns_id, corpus, src_rowid, terms, n_terms) "
    "VALUES (%(ns)s, %(corpus)s, %(rowid)s, %(terms)s, %(n)s)), "
    "post AS (INSERT INTO postings (ns_id, corpus, term, src_rowid, tf, n_terms) "
    "SELECT %(ns)s, %(corpus)s, t, %(rowid)s, count(*), %(n)s FROM unnest(%(terms)s::text[]) t GROUP BY t), "
    "tot AS (UPDATE namespaces SET n_docs = n_docs + 1, total_len = total_len + %(n)s WHERE ns_id = %(ns)s), "
    "log AS (INSERT INTO text_log (ns_id, corpus, src_rowid, op) VALUES (%(ns)s, %(corpus)s, %(rowid)s, 1)) "
    "INSERT INTO term_stats (ns_id, term, df) SELECT %(ns)s, t, 1 FROM unnest(%(distinct)s::text[]) t "
    "ON CONFLICT (ns_id, term) DO UPDATE SET df = term_stats.df + 1"
)
"""`_INDEX` for one document (a single note's write, the common one): without the batch's
grouping, which costs a single document about 5 % of the write rate."""


def index(scope: Scope, ns_id: int, key: tuple[int, int], terms: Sequence[str]) -> None:
    """Index a (corpus, rowid) document and count it in the namespace's statistics."""
    scope.ns(ns_id).lock_ns(ns_id)
    scope.execute(
        _INDEX_ONE,
        {
            "ns": ns_id,
            "corpus": key[0],
            "rowid": key[1],
            "terms": list(terms),
            "n": len(terms),
            "distinct": sorted(set(terms)),
        },
    )


def index_many(scope: Scope, ns_id: int, docs: Sequence[tuple[tuple[int, int], Sequence[str]]]) -> None:
    """`index` each (corpus, rowid) document: one statement a corpus for the batch."""
    if len(docs) <= 1:  # nothing, or one document: the one-row statement
        for key, terms in docs:
            index(scope, ns_id, key, terms)
        return
    scope.ns(ns_id).lock_ns(ns_id)
    for corpus in sorted({key[0] for key, _ in docs}):
        scope.execute(_INDEX, _batch_params(ns_id, corpus, [(k[1], t) for k, t in docs if k[0] == corpus]))


def _batch_params(ns_id: int, corpus: int, docs: Sequence[tuple[int, Sequence[str]]]) -> dict[str, object]:
    """`_INDEX`'s parameters for some documents of one corpus, (rowid, terms) each: the
    documents with a term, their terms space-joined and their lengths (three arrays of one
    element a document: dumping one of an element a term cost more than the statement); the
    documents without a term."""
    terms_of = [(rowid, terms) for rowid, terms in docs if terms]
    return {
        "ns": ns_id,
        "corpus": corpus,
        "rowid": [rowid for rowid, _ in docs],
        "empty": [rowid for rowid, terms in docs if not terms],
        "d_rowid": [rowid for rowid, _ in terms_of],
        "d_body": [" ".join(terms) for _, terms in terms_of],
        "d_n": [len(terms) for _, terms in terms_of],
        "docs": len(docs),
        "total": sum(len(terms) for _, terms in docs),
    }


_UNINDEX: Final = (
    "WITH post AS (DELETE FROM postings "
    "WHERE ns_id = %(ns)s AND corpus = %(corpus)s AND term = ANY(%(distinct)s) AND src_rowid = %(rowid)s), "
    "tot AS (UPDATE namespaces SET n_docs = n_docs - 1, total_len = total_len - %(n)s WHERE ns_id = %(ns)s), "
    "log AS (INSERT INTO text_log (ns_id, corpus, src_rowid, op) VALUES (%(ns)s, %(corpus)s, %(rowid)s, -1)) "
    "UPDATE term_stats SET df = df - 1 WHERE ns_id = %(ns)s AND term = ANY(%(distinct)s)"
)
"""Undo `index` for a document whose terms were just deleted with it (a term whose `df`
falls to 0 keeps its row: every read asks for `df > 0`)."""


def unindex(scope: Scope, ns_id: int, key: tuple[int, int]) -> None:
    """Remove a document from the index and the statistics (exactly undoing `index`)."""
    scope.ns(ns_id).lock_ns(ns_id)
    row = scope.one(
        "DELETE FROM docs WHERE ns_id = %s AND corpus = %s AND src_rowid = %s RETURNING terms",
        (ns_id, key[0], key[1]),
    )
    if row is None:
        return
    terms: list[str] = list(row[0])
    scope.execute(
        _UNINDEX,
        {"ns": ns_id, "corpus": key[0], "rowid": key[1], "n": len(terms), "distinct": sorted(set(terms))},
    )


def delete_vectors(scope: Scope, corpus: int, rowids: Sequence[int], *, ns_id: int | None = None) -> None:
    """Delete the vectors of rows of one corpus (each leaves a tombstone, by trigger).

    With `ns_id` the statement stays in that namespace's tenant; without it (the protocol's
    `delete_vectors` names no namespace) it reaches the rows whoever's they are.
    """
    sql, values = "DELETE FROM vectors WHERE corpus = %s AND src_rowid = ANY(%s)", [int(r) for r in rowids]
    if ns_id is not None:
        scope.ns(ns_id).execute(sql + " AND ns_id = %s", (corpus, values, ns_id))
        return
    with scope.every_tenant():
        scope.execute(sql, (corpus, values))
