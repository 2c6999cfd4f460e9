"""Versioned migrations of the one SQLite file (`PRAGMA user_version`), and per-namespace
FTS5 tables: each namespace has its own index, so term statistics never cross namespaces."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from broker.log import get_logger

from ._txn import rollback

logger = get_logger(__name__)

_CORPORA = 4  # fts rowid = source rowid * _CORPORA + corpus


def fts_rowid(corpus: int, rowid: int) -> int:
    """The FTS rowid of a row of one corpus."""
    return rowid * _CORPORA + corpus


def split_fts_rowid(fts_rowid_: int) -> tuple[int, int]:
    """(corpus, source rowid) of an FTS rowid."""
    return fts_rowid_ % _CORPORA, fts_rowid_ // _CORPORA


def fts_table(ns_id: int) -> str:
    """Name of a namespace's FTS5 table; ns_id is an integer, so the name is safe to format."""
    return f"fts_{int(ns_id)}"


def vocab_table(ns_id: int) -> str:
    """Name of a namespace's fts5vocab table (per-term document counts)."""
    return f"fts_{int(ns_id)}_vocab"


def _script(conn: sqlite3.Connection, sql: str) -> None:
    """Run DDL statements inside the caller's transaction (executescript would commit)."""
    for statement in sql.split(";"):
        if statement.strip():
            conn.execute(statement)


def _v1(conn: sqlite3.Connection) -> None:
    _script(
        conn,
        """
        CREATE TABLE namespaces (
            ns_id INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            project_id TEXT NOT NULL,
            n_docs INTEGER NOT NULL DEFAULT 0,
            total_len INTEGER NOT NULL DEFAULT 0,
            UNIQUE (tenant_id, project_id)
        );
        CREATE TABLE entries (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL,
            ns_id INTEGER NOT NULL REFERENCES namespaces(ns_id),
            tenant_id TEXT NOT NULL,
            project_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at TEXT NOT NULL,
            importance REAL NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            UNIQUE (ns_id, id)
        );
        """,
    )


def _v2(conn: sqlite3.Connection) -> None:
    """Add memory_type; backfill neurons to `associative` once, here, never on connect."""
    cols = {row[1] for row in conn.execute("PRAGMA table_info(entries)")}
    if "memory_type" not in cols:
        conn.execute("ALTER TABLE entries ADD COLUMN memory_type TEXT")
    n = conn.execute(
        "UPDATE entries SET memory_type = 'associative' WHERE kind = 'neuron' AND memory_type IS NULL"
    ).rowcount
    logger.debug("store.migration.backfill", column="memory_type", neuron_rows=n)


def _v3(conn: sqlite3.Connection) -> None:
    """Tables of the other sources, the dense vectors, tasks and memorules."""
    _script(
        conn,
        """
        CREATE INDEX entries_kind ON entries (ns_id, kind);
        CREATE TABLE vectors (
            corpus INTEGER NOT NULL,
            src_rowid INTEGER NOT NULL,
            ns_id INTEGER NOT NULL,
            model_id TEXT NOT NULL,
            vec BLOB NOT NULL,
            PRIMARY KEY (corpus, src_rowid)
        );
        CREATE INDEX vectors_ns ON vectors (ns_id, corpus);
        CREATE TABLE neuron_triggers (
            ns_id INTEGER NOT NULL,
            term TEXT NOT NULL,
            entry_rowid INTEGER NOT NULL
        );
        CREATE INDEX neuron_triggers_term ON neuron_triggers (ns_id, term);
        CREATE INDEX neuron_triggers_entry ON neuron_triggers (entry_rowid);
        CREATE TABLE facts (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL,
            ns_id INTEGER NOT NULL,
            subject TEXT,
            predicate TEXT,
            object TEXT,
            text TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            UNIQUE (ns_id, id)
        );
        CREATE TABLE knowledge (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL,
            ns_id INTEGER NOT NULL,
            text TEXT NOT NULL,
            provenance TEXT NOT NULL DEFAULT '[]',
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            UNIQUE (ns_id, id)
        );
        CREATE TABLE graph_nodes (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL,
            ns_id INTEGER NOT NULL,
            name TEXT NOT NULL,
            aliases TEXT NOT NULL DEFAULT '[]',
            description TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            UNIQUE (ns_id, id)
        );
        CREATE TABLE graph_keys (
            ns_id INTEGER NOT NULL,
            key TEXT NOT NULL,
            node_rowid INTEGER NOT NULL,
            PRIMARY KEY (ns_id, key, node_rowid)
        );
        CREATE INDEX graph_keys_node ON graph_keys (node_rowid);
        CREATE TABLE graph_edges (
            rowid INTEGER PRIMARY KEY,
            ns_id INTEGER NOT NULL,
            src_rowid INTEGER NOT NULL,
            dst_rowid INTEGER NOT NULL,
            relation TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (src_rowid, dst_rowid, relation)
        );
        CREATE INDEX graph_edges_dst ON graph_edges (dst_rowid);
        CREATE TABLE tasks (
            ns_id INTEGER NOT NULL,
            task_id TEXT NOT NULL,
            description TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (ns_id, task_id)
        );
        CREATE INDEX tasks_status ON tasks (ns_id, status, updated_at);
        CREATE TABLE conversation_turns (
            rowid INTEGER PRIMARY KEY,
            ns_id INTEGER NOT NULL,
            task_id TEXT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX conversation_turns_task ON conversation_turns (ns_id, task_id, rowid);
        CREATE TABLE memorule_states (
            rowid INTEGER PRIMARY KEY,
            entry_rowid INTEGER NOT NULL,
            memorule_kind TEXT NOT NULL,
            subject TEXT NOT NULL,
            body TEXT NOT NULL,
            applies_to TEXT NOT NULL,
            evidence_signal_id TEXT,
            confidence TEXT NOT NULL,
            written_by_session_id TEXT,
            written_by_persona TEXT,
            written_at TEXT NOT NULL
        );
        CREATE INDEX memorule_states_entry ON memorule_states (entry_rowid, rowid);
        CREATE TABLE memorule_audit (
            rowid INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            project_id TEXT NOT NULL,
            memorule_id TEXT NOT NULL,
            action TEXT NOT NULL,
            written_by_session_id TEXT,
            written_by_persona TEXT,
            evidence_signal_id TEXT,
            written_at TEXT NOT NULL
        );
        CREATE INDEX memorule_audit_time ON memorule_audit (written_at);
        """,
    )


TOMBSTONES_KEPT = 100_000
"""Deleted-vector tombstones kept; an index that fell further behind reloads its matrix."""

_GENERATION_TABLES = (
    "entries",
    "facts",
    "knowledge",
    "vectors",
    "graph_nodes",
    "graph_keys",
    "graph_edges",
    "neuron_triggers",
    "tasks",
    "conversation_turns",
)


def _generation_triggers(conn: sqlite3.Connection) -> None:
    """Every insert, update and delete of a namespace's rows bumps its write generation.

    Triggers, not code paths: no writer (another process, an older version, a new corpus)
    can change a namespace without its caches seeing it.
    """
    bump = "UPDATE namespaces SET generation = generation + 1 WHERE ns_id"
    for table in _GENERATION_TABLES:
        conn.execute(f"CREATE TRIGGER {table}_gen_ins AFTER INSERT ON {table} BEGIN {bump} = NEW.ns_id; END")
        conn.execute(f"CREATE TRIGGER {table}_gen_del AFTER DELETE ON {table} BEGIN {bump} = OLD.ns_id; END")
        conn.execute(
            f"CREATE TRIGGER {table}_gen_upd AFTER UPDATE ON {table} "
            f"BEGIN {bump} IN (OLD.ns_id, NEW.ns_id); END"
        )
    owner = "(SELECT ns_id FROM entries WHERE rowid = {}.entry_rowid)"
    for event, row in (("INSERT", "NEW"), ("DELETE", "OLD"), ("UPDATE", "NEW")):
        conn.execute(
            f"CREATE TRIGGER memorule_states_gen_{event.lower()[:3]} AFTER {event} ON memorule_states "
            f"BEGIN {bump} = {owner.format(row)}; END"
        )


def _v4(conn: sqlite3.Connection) -> None:
    """Write generations and vector ids that are never reused (the tenant-leak fix).

    `namespaces.generation` is bumped by triggers on every write of a namespace's rows.
    `vectors` gets an AUTOINCREMENT id (a deleted vector's id is never given to another
    row) and every deleted vector leaves a tombstone, so an in-memory index catches up
    with any process's writes exactly: rows with a larger id were added, tombstones with
    a larger id were removed.
    """
    conn.execute("ALTER TABLE namespaces ADD COLUMN generation INTEGER NOT NULL DEFAULT 0")
    _script(
        conn,
        """
        CREATE TABLE vectors_v4 (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            corpus INTEGER NOT NULL,
            src_rowid INTEGER NOT NULL,
            ns_id INTEGER NOT NULL,
            model_id TEXT NOT NULL,
            vec BLOB NOT NULL,
            UNIQUE (corpus, src_rowid)
        );
        INSERT INTO vectors_v4 (id, corpus, src_rowid, ns_id, model_id, vec)
            SELECT rowid, corpus, src_rowid, ns_id, model_id, vec FROM vectors ORDER BY rowid;
        DROP TABLE vectors;
        ALTER TABLE vectors_v4 RENAME TO vectors;
        CREATE INDEX vectors_ns ON vectors (ns_id, corpus);
        CREATE TABLE vector_tombstones (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ns_id INTEGER NOT NULL,
            corpus INTEGER NOT NULL,
            vector_id INTEGER NOT NULL
        );
        CREATE INDEX vector_tombstones_ns ON vector_tombstones (ns_id, corpus)
        """,
    )
    conn.execute(
        "CREATE TRIGGER vectors_tombstone AFTER DELETE ON vectors BEGIN "
        "INSERT INTO vector_tombstones (ns_id, corpus, vector_id) VALUES (OLD.ns_id, OLD.corpus, OLD.id); END"
    )
    conn.execute(
        "CREATE TRIGGER vector_tombstones_prune AFTER INSERT ON vector_tombstones "
        f"WHEN NEW.id % 1024 = 0 BEGIN "
        f"DELETE FROM vector_tombstones WHERE id <= NEW.id - {TOMBSTONES_KEPT}; END"
    )
    _generation_triggers(conn)


TEXT_LOG_KEPT = 100_000
"""Text-index changes kept; an in-memory index that fell further behind is built again."""


def _v5(conn: sqlite3.Connection) -> None:
    """A log of the text index's changes, so an in-memory index catches up with every write.

    `sources.storage._index.add_doc` and `remove_doc` (the only writers of the FTS tables) append one
    row per document indexed (op 1) or removed (op -1), in the write's transaction; ids are
    never reused. Older rows are pruned like vector tombstones.
    """
    _script(
        conn,
        """
        CREATE TABLE text_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ns_id INTEGER NOT NULL,
            fts_rowid INTEGER NOT NULL,
            op INTEGER NOT NULL
        );
        CREATE INDEX text_log_ns ON text_log (ns_id, id)
        """,
    )
    conn.execute(
        "CREATE TRIGGER text_log_prune AFTER INSERT ON text_log "
        f"WHEN NEW.id % 1024 = 0 BEGIN DELETE FROM text_log WHERE id <= NEW.id - {TEXT_LOG_KEPT}; END"
    )


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3, _v4, _v5)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the file to SCHEMA_VERSION, one transaction per step; returns steps applied."""
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    applied = 0
    for step in range(version, SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            current: int = conn.execute("PRAGMA user_version").fetchone()[0]
            if current > step:  # another process migrated meanwhile
                conn.execute("COMMIT")
                continue
            MIGRATIONS[step](conn)
            conn.execute(f"PRAGMA user_version = {step + 1}")
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
        applied += 1
        logger.debug("store.migrated", to_version=step + 1)
    return applied


def ensure_memory_type_column(conn: sqlite3.Connection) -> int:
    """Idempotent and self-healing: add the column if missing and classify unclassified
    neuron rows as `associative`; explicit classifications are never touched."""
    cols = {row[1] for row in conn.execute("PRAGMA table_info(entries)")}
    conn.execute("BEGIN IMMEDIATE")
    try:
        if "memory_type" not in cols:
            conn.execute("ALTER TABLE entries ADD COLUMN memory_type TEXT")
        n = conn.execute(
            "UPDATE entries SET memory_type = 'associative' WHERE kind = 'neuron' AND memory_type IS NULL"
        ).rowcount
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return n


def create_namespace_index(conn: sqlite3.Connection, ns_id: int) -> None:
    """Create a namespace's FTS5 table and its vocabulary view (inside the caller's write)."""
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts_table(ns_id)} "
        "USING fts5(body, tokenize = 'unicode61 remove_diacritics 0')"
    )
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab_table(ns_id)} USING fts5vocab({fts_table(ns_id)}, 'row')"
    )
