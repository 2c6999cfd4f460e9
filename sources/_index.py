"""Per-namespace text index shared by every corpus (entries, facts, knowledge): one FTS5
table and one set of term statistics per namespace, kept in the caller's transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from broker import Namespace

from . import _analysis, _schema
from ._relevance import LexicalHit, QueryProfile


def find_ns(conn: sqlite3.Connection, namespace: Namespace) -> int | None:
    """The namespace's id, or None if nothing was ever written to it."""
    row = conn.execute(
        "SELECT ns_id FROM namespaces WHERE tenant_id = ? AND project_id = ?",
        (namespace.tenant_id, namespace.project_id),
    ).fetchone()
    return None if row is None else int(row[0])


def ensure_ns(conn: sqlite3.Connection, namespace: Namespace) -> int:
    """The namespace's id, creating it and its index (inside the caller's write)."""
    found = find_ns(conn, namespace)
    if found is not None:
        return found
    cur = conn.execute(
        "INSERT INTO namespaces (tenant_id, project_id) VALUES (?, ?)",
        (namespace.tenant_id, namespace.project_id),
    )
    ns_id = int(cur.lastrowid or 0)
    _schema.create_namespace_index(conn, ns_id)
    return ns_id


def add_doc(conn: sqlite3.Connection, ns_id: int, corpus: int, rowid: int, text: str) -> None:
    """Index one document and count it in the namespace's statistics."""
    body = _analysis.index_text(text)
    conn.execute(
        f"INSERT INTO {_schema.fts_table(ns_id)} (rowid, body) VALUES (?, ?)",
        (_schema.fts_rowid(corpus, rowid), body),
    )
    length = len(body.split())
    conn.execute(
        "UPDATE namespaces SET n_docs = n_docs + 1, total_len = total_len + ? WHERE ns_id = ?",
        (length, ns_id),
    )
    _log(conn, ns_id, _schema.fts_rowid(corpus, rowid), 1)


def remove_doc(conn: sqlite3.Connection, ns_id: int, corpus: int, rowid: int) -> None:
    """Remove one document from the index and the statistics."""
    table = _schema.fts_table(ns_id)
    key = _schema.fts_rowid(corpus, rowid)
    row = conn.execute(f"SELECT body FROM {table} WHERE rowid = ?", (key,)).fetchone()
    if row is None:
        return
    conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (key,))
    conn.execute(
        "UPDATE namespaces SET n_docs = n_docs - 1, total_len = total_len - ? WHERE ns_id = ?",
        (len(str(row[0]).split()), ns_id),
    )
    _log(conn, ns_id, key, -1)


def _log(conn: sqlite3.Connection, ns_id: int, fts_rowid: int, op: int) -> None:
    """Record a change of the text index (`_schema._v5`): in-memory indexes catch up from it."""
    conn.execute("INSERT INTO text_log (ns_id, fts_rowid, op) VALUES (?, ?, ?)", (ns_id, fts_rowid, op))


def generation(conn: sqlite3.Connection, ns_id: int) -> int:
    """The namespace's write generation (bumped by every write to it; schema triggers)."""
    row = conn.execute("SELECT generation FROM namespaces WHERE ns_id = ?", (ns_id,)).fetchone()
    return 0 if row is None else int(row[0])


def profile(conn: sqlite3.Connection, ns_id: int | None, query: str) -> QueryProfile:
    """Profile a query against a namespace's statistics (empty namespace: no statistics)."""
    qterms = _analysis.query_terms(query)
    if ns_id is None or not qterms:
        return QueryProfile.build(qterms, n_docs=0, total_len=0, df={})
    n_docs, total_len, generation = conn.execute(
        "SELECT n_docs, total_len, generation FROM namespaces WHERE ns_id = ?", (ns_id,)
    ).fetchone()
    marks = ",".join("?" * len(qterms))
    df = {
        str(term): int(doc)
        for term, doc in conn.execute(
            f"SELECT term, doc FROM {_schema.vocab_table(ns_id)} WHERE term IN ({marks})",
            qterms,
        )
    }
    return QueryProfile.build(
        qterms, n_docs=int(n_docs), total_len=int(total_len), df=df, generation=int(generation)
    )


def search(
    conn: sqlite3.Connection,
    ns_id: int,
    qterms: Sequence[str],
    *,
    corpus: int,
    limit: int,
) -> list[int]:
    """Source rowids of one corpus matching any term, best BM25 first (namespace statistics)."""
    if not qterms:
        return []
    table = _schema.fts_table(ns_id)
    rows = conn.execute(
        f"SELECT rowid FROM {table} WHERE {table} MATCH ? AND (rowid & 3) = ? "
        f"ORDER BY bm25({table}), rowid LIMIT ?",
        (_analysis.fts_query(tuple(qterms)), corpus, limit),
    ).fetchall()
    return [_schema.split_fts_rowid(int(r[0]))[1] for r in rows]


def search_hits(
    conn: sqlite3.Connection,
    ns_id: int,
    qterms: Sequence[str],
    *,
    corpus: int,
    limit: int,
) -> list[LexicalHit]:
    """`search` with each match's BM25 rank and analysed terms (its indexed body).

    The rank is taken in the FTS table and only the top `limit` bodies are read: reading
    every match's body before the sort costs about twice as much at 100k.
    """
    if not qterms:
        return []
    table = _schema.fts_table(ns_id)
    rows = conn.execute(
        f"SELECT top.r, top.rank, b.body FROM (SELECT rowid AS r, bm25({table}) AS rank FROM {table} "
        f"WHERE {table} MATCH ? AND (rowid & 3) = ? ORDER BY rank, rowid LIMIT ?) AS top "
        f"JOIN {table} b ON b.rowid = top.r ORDER BY top.rank, top.r",
        (_analysis.fts_query(tuple(qterms)), corpus, limit),
    ).fetchall()
    return [
        LexicalHit(_schema.split_fts_rowid(int(r))[1], float(rank), tuple(str(body).split()))
        for r, rank, body in rows
    ]
