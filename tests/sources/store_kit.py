"""The storage engines the store-level suites run on, defined once: `sqlite` (a file in
`tmp_path`) and `postgres` (a fresh database on the test server, `tests/pg_server.py`).

A suite takes the `make_store` fixture (tests/sources/conftest.py), parametrised over
ENGINES: `make_store(mode=..., embedder=...)` opens a store on the test's one database, as
many times as the test asks (two stores on it are two processes' views of one memory), and
closes them all after the test; `make_store.open_engine()` opens a bare engine on it the
same way (the `engine` fixture: the vector-index tests). Without the PostgreSQL extra the
`postgres` cases skip, saying so (they fail under `CONTEXT_BROKER_REQUIRE_PG=1`). `sql_rows`,
`engine_rows` and the helpers after them look at the tables the same way on both engines.
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import pytest

from sources import MemoryStore
from sources.storage._sqlite import SqliteEngine

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from broker.abc import Embedder
    from sources.storage._engine import Engine

SQLITE: Final = "sqlite"
POSTGRES: Final = "postgres"
ENGINES: Final = (
    pytest.param(SQLITE, id=SQLITE),
    pytest.param(POSTGRES, id=POSTGRES, marks=pytest.mark.postgres),
)
"""The `params` of every engine-parametrised fixture; a test id ends in `[sqlite]` or `[postgres]`."""


@attrs.define(eq=False)
class StoreOpener:
    """Open stores on one test database of one engine; `close_all` after the test."""

    engine: str
    target: str
    """The SQLite file's path, or the PostgreSQL database's URL."""
    _opened: list[MemoryStore] = attrs.field(factory=list, init=False)
    _engines: list[Engine] = attrs.field(factory=list, init=False)

    def __call__(self, *, mode: str | None = "lexical", embedder: Embedder | None = None) -> MemoryStore:
        """A store on the test's database (a new connection each call, as another process);
        `mode=None`: the store's own default mode."""
        modes = {} if mode is None else {"mode": mode}
        if self.engine == SQLITE:
            store = MemoryStore.open(self.target, embedder=embedder, **modes)
        else:
            from sources.storage._postgres import PostgresEngine  # noqa: PLC0415 - only where the extra is

            store = MemoryStore.on(
                PostgresEngine.open(self.target, connections=2), embedder=embedder, **modes
            )
        self._opened.append(store)
        return store

    def open_engine(self) -> Engine:
        """A migrated engine on the test's database, without a store (a new connection each
        call, as another process); PostgreSQL: a pool of two connections."""
        engine: Engine
        if self.engine == SQLITE:
            engine = SqliteEngine.open(self.target)
        else:
            from sources.storage._postgres import PostgresEngine  # noqa: PLC0415 - only where the extra is

            engine = PostgresEngine.open(self.target, connections=2)
        self._engines.append(engine)
        return engine

    def close_all(self) -> None:
        """Close every store and engine this opened (closing twice is harmless)."""
        for store in reversed(self._opened):
            store.close()
        for engine in reversed(self._engines):
            engine.close()


def fresh_databases(
    engine: str, request: pytest.FixtureRequest
) -> Callable[[], tuple[StoreOpener, Callable[[], None]]]:
    """Make a fresh database of `engine` on each call, with the function that removes it: for
    tests that need more than the one database of `make_store` (each example of a stateful
    hypothesis test). A PostgreSQL database is created on the test server, as `pg_url` does."""
    if engine == SQLITE:

        def new_file() -> tuple[StoreOpener, Callable[[], None]]:
            folder = tempfile.TemporaryDirectory()
            return StoreOpener(SQLITE, str(Path(folder.name) / "t.db")), folder.cleanup

        return new_file
    # The server fixture first: without the extra it skips (or fails, as CI asks) with its message.
    admin_url: str = request.getfixturevalue("pg_server")
    import psycopg  # noqa: PLC0415 - only where the extra is
    from pg_server import with_database  # noqa: PLC0415 - the plugin, loaded by tests/conftest.py

    def new_database() -> tuple[StoreOpener, Callable[[], None]]:
        name = f"cb_test_{secrets.token_hex(6)}"
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")

        def drop() -> None:
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

        return StoreOpener(POSTGRES, with_database(admin_url, name)), drop

    return new_database


def sql_rows(
    store: MemoryStore, sql: str, params: Sequence[object] = (), *, write: bool = False
) -> list[tuple[Any, ...]]:
    """The rows of one statement (`?` placeholders) on the store's database, past the tenant
    wall (the tables are the same on both engines); `write`: in a write transaction."""
    return engine_rows(store.engine, sql, params, write=write)


def engine_rows(
    engine: Engine, sql: str, params: Sequence[object] = (), *, write: bool = False
) -> list[tuple[Any, ...]]:
    """`sql_rows` on an engine: one statement in a transaction of its own, past the tenant wall."""
    if isinstance(engine, SqliteEngine):
        with engine.write() if write else engine.read() as conn:
            return list(conn.execute(sql, params).fetchall())
    from sources.storage._postgres import PostgresEngine  # noqa: PLC0415 - only where the extra is

    assert isinstance(engine, PostgresEngine)
    with engine.database.transaction(write=write) as session, session.all_tenants():
        cur = session.execute(sql.replace("?", "%s"), tuple(params))
        return list(cur.fetchall()) if cur.description is not None else []


def indexed(store: MemoryStore, ns_id: int, corpus: int | None = None) -> int:
    """How many documents (of `corpus`, else of every corpus) a namespace's text index holds:
    rows of its FTS5 table on SQLite (a rowid's low two bits are its corpus), of `docs` on
    PostgreSQL."""
    if isinstance(store.engine, SqliteEngine):
        where = "" if corpus is None else f" WHERE (rowid & 3) = {int(corpus)}"
        rows = sql_rows(store, f"SELECT count(*) FROM fts_{int(ns_id)}{where}")
    elif corpus is None:
        rows = sql_rows(store, "SELECT count(*) FROM docs WHERE ns_id = ?", (ns_id,))
    else:
        rows = sql_rows(store, "SELECT count(*) FROM docs WHERE ns_id = ? AND corpus = ?", (ns_id, corpus))
    return int(rows[0][0])


# The PostgreSQL text index (docs, postings, term statistics, the namespaces' counts) agrees
# with itself and with the corpora: what FTS5's integrity-check proves on SQLite. Each query
# counts the rows that break one rule.
_PG_INDEX_RULES: Final = (
    (
        "SELECT count(*) FROM postings p WHERE NOT EXISTS (SELECT 1 FROM docs d "
        "WHERE d.ns_id = p.ns_id AND d.corpus = p.corpus AND d.src_rowid = p.src_rowid)"
    ),
    (
        "SELECT count(*) FROM docs d WHERE cardinality(ARRAY(SELECT DISTINCT unnest(d.terms))) <> (SELECT count(*) "
        "FROM postings p WHERE p.ns_id = d.ns_id AND p.corpus = d.corpus AND p.src_rowid = d.src_rowid)"
    ),
    (
        "SELECT count(*) FROM docs d WHERE d.corpus = 0 AND NOT EXISTS "
        "(SELECT 1 FROM entries e WHERE e.rowid = d.src_rowid AND e.ns_id = d.ns_id)"
    ),
    (
        "SELECT count(*) FROM term_stats t WHERE t.df <> "
        "(SELECT count(*) FROM postings p WHERE p.ns_id = t.ns_id AND p.term = t.term)"
    ),
    (
        "SELECT count(*) FROM namespaces n WHERE n.n_docs <> (SELECT count(*) FROM docs d WHERE d.ns_id = n.ns_id) "
        "OR n.total_len <> (SELECT coalesce(sum(d.n_terms), 0) FROM docs d WHERE d.ns_id = n.ns_id)"
    ),
)


def text_index_ok(store: MemoryStore) -> bool:
    """Whether the text index is consistent: every namespace's FTS5 table passes its
    integrity-check (SQLite), or no row breaks the rules above (PostgreSQL)."""
    if isinstance(store.engine, SqliteEngine):
        for (ns_id,) in sql_rows(store, "SELECT ns_id FROM namespaces"):
            table = f"fts_{int(ns_id)}"
            sql_rows(store, f"INSERT INTO {table}({table}) VALUES ('integrity-check')", write=True)
        return True
    return all(sql_rows(store, rule) == [(0,)] for rule in _PG_INDEX_RULES)
