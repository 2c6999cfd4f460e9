"""`PostgresEngine`: the storage engine protocol (`sources.storage._engine`) over one PostgreSQL
database, for many agent processes on many machines sharing one memory.

A read is one snapshot (REPEATABLE READ, READ ONLY) on a pooled connection; a write is one
transaction whose writers of a namespace are serialised by the namespace's lock. Each
statement runs inside the tenant wall (`_schema`), scoped to the tenant of the namespace it
names. A stop (`sources.storage._engine.Stop`) cancels the running statement on the server and
fails every later one of that read (`_database`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import attrs

from broker import ConfigError
from sources.storage._read_once import ReadOnce

from ._database import DEFAULT_CONNECTIONS, PostgresDatabase
from ._reader import PostgresReader, PostgresWriter
from ._sql import Scope

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sources.storage._engine import Engine, Stop


@attrs.define(eq=False)
class PostgresEngine:
    """The `sources.storage._engine.Engine` of one PostgreSQL database; thread-safe."""

    database: PostgresDatabase
    statement_timeout: float | None = None
    """Seconds any one statement may run (the server cancels it): a backstop behind the
    stop, for a client that froze or lost its cancel request. None: no limit."""
    _tenants: dict[int, str] = attrs.field(factory=dict, init=False)
    """Each namespace id's tenant (a namespace never changes hands), shared by every read."""
    _ids: dict[tuple[str, str], int] = attrs.field(factory=dict, init=False)
    """Each committed namespace's id (`Scope.ids`): no lookup a transaction once it is known."""

    @classmethod
    def open(
        cls,
        url: str,
        *,
        migrate: bool = True,
        connections: int = DEFAULT_CONNECTIONS,
        statement_timeout: float | None = None,
    ) -> PostgresEngine:
        """Connect (and migrate): `PostgresDatabase.open`. ConfigError: a bad URL, a missing
        extra, a timeout that is not positive; StoreError: the server refuses or is away."""
        if statement_timeout is not None and not statement_timeout > 0:
            raise ConfigError(
                f"statement_timeout must be positive seconds or None; got {statement_timeout!r}"
            )
        database = PostgresDatabase.open(url, migrate=migrate, connections=connections)
        return cls(database, statement_timeout=statement_timeout)

    @property
    def location(self) -> str:
        """The server's URL without its password."""
        return self.database.where

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self.database.closed

    @property
    def vector_dir(self) -> Path | None:
        """None: no local files; each process keeps its HNSW graphs in memory only."""
        return None

    @property
    def read_threads(self) -> int:
        """The pool's connections: a read waits on the server's round trips, which overlap."""
        return int(self.database.limiter.total_tokens)

    @contextlib.contextmanager
    def read(self, stop: Stop | None = None) -> Iterator[PostgresReader]:
        """One snapshot on a pooled connection (`Engine.read`)."""
        with self.database.transaction(stop=stop, timeout=self.statement_timeout) as session:
            yield PostgresReader(Scope(session, self._tenants, self._ids, snapshot=ReadOnce()))

    @contextlib.contextmanager
    def write(self) -> Iterator[PostgresWriter]:
        """One write transaction (`Engine.write`)."""
        with self.database.transaction(write=True, timeout=self.statement_timeout) as session:
            yield PostgresWriter(Scope(session, self._tenants, self._ids, writing=True))

    def close(self) -> None:
        """Close every connection."""
        self.database.close()

    def change_stamp(self, *, wait: bool = False) -> int | None:  # noqa: ARG002 - the protocol's
        """None: unknown. PostgreSQL has no counter every commit bumps that a client could read
        without a round trip (SQLite's `data_version` is read from shared memory); callers
        then read the namespaces' write generations, which every commit of their rows bumps."""
        return None

    def refresh_statistics(self) -> None:
        """ANALYZE the schema's tables: right after a bulk load the planner's estimates are far
        too low until autovacuum analyzes them (within about a minute), and hybrid turns were
        up to twice as slow meanwhile (docs/postgres.md). As the connecting role, not the
        application role (ANALYZE needs the tables' owner; another role's ANALYZE only warns
        and skips them, and autovacuum still does it)."""
        with self.database.transaction(write=True) as session:
            session.execute("SET LOCAL ROLE NONE")
            tables = session.execute(
                "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = %s", ("context_broker",)
            ).fetchall()
            if tables:
                session.execute("ANALYZE " + ", ".join(f"context_broker.{t[0]}" for t in tables))

    def size_bytes(self) -> int:
        """Bytes of the schema's tables and indexes on the server."""
        with self.database.transaction() as session:
            row = session.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                ("context_broker",),
            ).fetchone()
        return 0 if row is None else int(row[0])

    def schema_version(self) -> int:
        """The `context_broker.schema_version` row."""
        with self.database.transaction() as session:
            row = session.execute("SELECT version FROM schema_version").fetchone()
        return 0 if row is None else int(row[0])


if TYPE_CHECKING:
    _CONFORMS: type[Engine] = PostgresEngine  # mypy checks every method of the protocol
