"""SQL pieces every SQLite corpus shares: chunked `IN` lists, the FTS5 match of some terms,
and the deletes that reach the index and the vectors."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from sources.storage._engine import CORPUS_ENTRIES, CORPUS_FACTS, CORPUS_KNOWLEDGE

from . import _schema

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

CORPUS_TABLES: Final = {
    CORPUS_ENTRIES: "entries",
    CORPUS_FACTS: "facts",
    CORPUS_KNOWLEDGE: "knowledge",
}
"""Each indexed corpus and its table."""
_WORD: Final = re.compile(r"[^\W_]+")
_IN_CHUNK: Final = 500  # bound on `IN (...)` parameters per statement


def marks(n: int) -> str:
    """`?, ?, ...` for an `IN (...)` list of n parameters."""
    return ",".join("?" * n)


def select_in(
    conn: sqlite3.Connection, sql: str, values: Sequence[Any], params: Sequence[Any] = ()
) -> list[Any]:
    """Run `sql` (one `{marks}` placeholder for an `IN` list) over `values` in chunks;
    `params` are bound before the list."""
    rows: list[Any] = []
    for start in range(0, len(values), _IN_CHUNK):
        part = values[start : start + _IN_CHUNK]
        rows += conn.execute(sql.format(marks=marks(len(part))), [*params, *part]).fetchall()
    return rows


def fts_terms(terms: Sequence[str]) -> list[str]:
    """The terms an index of analysed terms can hold: one word of letters and digits each.

    Any other "term" (punctuation, spaces, quotes) matches no document of any engine, so it
    is dropped here rather than handed to FTS5, whose tokenizer would split it into a phrase.
    """
    return [t for t in terms if _WORD.fullmatch(t)]


def fts_match(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression OR-ing the terms (of `fts_terms`); each quoted, never syntax."""
    return " OR ".join(f'"{t}"' for t in terms)


def unindex(conn: sqlite3.Connection, ns_id: int, key: tuple[int, int]) -> None:
    """Remove a (corpus, rowid) document from the namespace's FTS table and statistics."""
    table, fts_key = _schema.fts_table(ns_id), _schema.fts_rowid(*key)
    row = conn.execute(f"SELECT body FROM {table} WHERE rowid = ?", (fts_key,)).fetchone()
    if row is None:
        return
    conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (fts_key,))
    conn.execute(
        "UPDATE namespaces SET n_docs = n_docs - 1, total_len = total_len - ? WHERE ns_id = ?",
        (len(str(row[0]).split()), ns_id),
    )
    log_text(conn, ns_id, fts_key, -1)


def log_text(conn: sqlite3.Connection, ns_id: int, fts_rowid: int, op: int) -> None:
    """Record a change of the text index (`_schema._v5`): in-memory indexes catch up from it."""
    conn.execute("INSERT INTO text_log (ns_id, fts_rowid, op) VALUES (?, ?, ?)", (ns_id, fts_rowid, op))


def log_texts(conn: sqlite3.Connection, ns_id: int, fts_rowids: Sequence[int], op: int) -> None:
    """`log_text` of each FTS rowid, in order."""
    conn.executemany(
        "INSERT INTO text_log (ns_id, fts_rowid, op) VALUES (?, ?, ?)", [(ns_id, r, op) for r in fts_rowids]
    )


def delete_vectors(conn: sqlite3.Connection, corpus: int, rowids: Sequence[int]) -> None:
    """Delete the vectors of rows of one corpus (each leaves a tombstone, by trigger)."""
    conn.executemany(
        "DELETE FROM vectors WHERE corpus = ? AND src_rowid = ?", [(corpus, int(r)) for r in rowids]
    )
