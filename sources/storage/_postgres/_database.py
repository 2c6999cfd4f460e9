"""A PostgreSQL database: a pool of connections used from worker threads, one transaction per
unit of work, each for one tenant, each cut at the caller's deadline.

Cutting at the deadline. A unit of work runs in a worker thread (`sources.storage._threads`); when
the caller's scope is cancelled the interrupt (`sources.storage._engine.Stop`) asks the server to cancel
the running statement (`cancel_safe`), and the statement fails with QueryCanceled, which rolls
the transaction back.
A cancel request only stops a statement that is running when it arrives; one that lands
between two statements would be lost, so the interrupt also raises a flag that the session
checks before each statement. And the server has its own wall: each transaction sets
`statement_timeout` to the time left, so a statement whose client froze or lost the cancel
still stops. The connection is detached from the interrupt (under a lock) before it returns
to the pool, so a late interrupt never reaches another unit's statement.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import TYPE_CHECKING, Final, TypeVar

import anyio
import attrs

from broker import BrokerClosedError, ConfigError
from sources._exceptions import StoreError
from sources.storage._engine import ReadStop
from sources.storage._threads import run_sync_interruptible

from . import _driver, _schema

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import TypeAlias

    from psycopg import Connection, Cursor, ServerCursor
    from psycopg.rows import TupleRow
    from psycopg_pool import ConnectionPool

    from sources.storage._engine import Stop

    Params: TypeAlias = Sequence[object] | Mapping[str, object]
    """A statement's parameters: positional (`%s`) or named (`%(name)s`)."""

T = TypeVar("T")

DEFAULT_CONNECTIONS: Final = 8
"""Connections of one pool, and worker threads its callers may run at once."""
CONNECT_TIMEOUT: Final = 5.0
"""Seconds to wait for the server (a connection, or a free one from the pool)."""
CANCEL_TIMEOUT: Final = 1.0
"""Seconds the interrupt waits for the server to take a cancel request."""


@attrs.define(eq=False)
class Session:
    """One transaction on one pooled connection; used in one thread.

    The tenant wall needs a tenant before each statement: `use_tenant` sets it
    (transaction-local, a round trip only when it changes), `all_tenants` lifts the wall
    for the statements of its block only.
    """

    _conn: Connection[TupleRow]
    _stop: Stop | None = None
    tenant_id: str | None = None

    def use_tenant(self, tenant_id: str) -> None:
        """Make the following statements see (and write) only `tenant_id`'s rows."""
        if tenant_id != self.tenant_id:
            self.execute("SELECT set_config('app.tenant_id', %s, true)", (tenant_id,))
            self.tenant_id = tenant_id

    @contextlib.contextmanager
    def all_tenants(self) -> Iterator[None]:
        """Statements of the block see every tenant's rows (upkeep that spans tenants)."""
        self.execute(f"SELECT set_config('{_schema.ALL_TENANTS}', 'on', true)")
        try:
            yield
        finally:
            # A failed statement aborted the transaction: nothing more runs in it (and trying
            # would hide the error); otherwise the wall is back before any other statement.
            if self._conn.info.transaction_status != _driver.psycopg().pq.TransactionStatus.INERROR:
                self.execute(f"SELECT set_config('{_schema.ALL_TENANTS}', 'off', true)")

    def execute(self, sql: str, params: Params = ()) -> Cursor[TupleRow]:
        """Run one statement; `StatementCancelledError` if the unit was stopped before it."""
        self._check_stop()
        return self._conn.execute(sql.encode(), params)

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement for each row (pipelined: one round trip per batch)."""
        self._check_stop()
        with self._conn.cursor() as cur:
            cur.executemany(sql.encode(), rows)

    def executemany_returning(self, sql: str, rows: Sequence[Params]) -> list[TupleRow]:
        """Run one statement for each row, pipelined (one round trip per batch), and return
        each statement's first row, in order (an INSERT ... RETURNING: a statement that
        returns no row is a RuntimeError)."""
        self._check_stop()
        found: list[TupleRow] = []
        if not rows:
            return found
        with self._conn.cursor() as cur:
            cur.executemany(sql.encode(), rows, returning=True)
            while True:
                row = cur.fetchone()
                if row is None:
                    msg = "a pipelined INSERT ... RETURNING returned no row"
                    raise RuntimeError(msg)
                found.append(row)
                if not cur.nextset():
                    return found

    @contextlib.contextmanager
    def cursor(self, name: str) -> Iterator[ServerCursor[TupleRow]]:
        """A server-side cursor of the transaction: rows are fetched as they are read."""
        self._check_stop()
        with self._conn.cursor(name) as cur:
            yield cur

    def _check_stop(self) -> None:
        if self._stop is not None and self._stop.tripped:
            raise _driver.StatementCancelledError(
                "stopped at the deadline: the statement was not run", source="postgres"
            )


@attrs.define(eq=False)
class PostgresDatabase:
    """Connections to one PostgreSQL database; thread-safe. Open with `PostgresDatabase.open`."""

    where: str
    """The server's URL without its password: what every message names."""
    _pool: ConnectionPool[Connection[TupleRow]]
    limiter: anyio.CapacityLimiter
    _closed: bool = False

    @classmethod
    def open(
        cls,
        url: str,
        *,
        migrate: bool = True,
        connections: int = DEFAULT_CONNECTIONS,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> PostgresDatabase:
        """Connect, check (and with `migrate`, bring up to date) the schema, open the pool.

        ConfigError: a bad URL, a missing extra, bad options. StoreError: the server is
        unreachable or refuses the login, the schema is newer than this code, or the tenant
        wall would not hold (the application role is a superuser or bypasses RLS).
        """
        if connections < 1:
            raise ConfigError(f"connections must be at least 1; got {connections}")
        _driver.check_url(url)
        where = _driver.redact(url)
        with _driver.translated(where):
            _prepare(url, where, migrate=migrate, connect_timeout=connect_timeout)
            pool = _driver.psycopg_pool().ConnectionPool(
                url,
                min_size=1,
                max_size=connections,
                open=False,
                configure=_configure,
                kwargs={"autocommit": True, "connect_timeout": max(1, math.ceil(connect_timeout))},
                timeout=connect_timeout,
                name="context-broker",
            )
            try:
                pool.open(wait=True, timeout=connect_timeout)
            except BaseException:
                pool.close()  # its worker threads with it
                raise
        return cls(where=where, pool=pool, limiter=anyio.CapacityLimiter(connections))

    @contextlib.contextmanager
    def transaction(
        self,
        tenant_id: str | None = None,
        *,
        write: bool = False,
        timeout: float | None = None,
        stop: Stop | None = None,
    ) -> Iterator[Session]:
        """One transaction: committed if the body returns, else rolled back.

        A read is one snapshot (REPEATABLE READ, READ ONLY). `tenant_id`: the tenant of its
        first statements (`Session.use_tenant`); `timeout` (seconds) becomes the
        transaction's statement_timeout; `stop` is the interrupt that may cancel it from
        another thread.
        """
        self._check_open()
        with _driver.translated(self.where), self._pool.connection() as conn:
            if stop is not None:
                stop.on_trip(functools.partial(_cancel, conn))
            try:
                _settle(conn, write=write)
                with conn.transaction():
                    _begin(conn, timeout=timeout)
                    session = Session(conn, stop)
                    if tenant_id is not None:
                        session.use_tenant(tenant_id)
                    yield session
            finally:
                if stop is not None:
                    stop.on_trip(None)

    async def run(self, tenant_id: str | None, fn: Callable[[Session], T], *, write: bool = False) -> T:
        """`fn(session)` in one transaction of `tenant_id`, in a worker thread behind the limiter,
        cut at the caller's deadline (cancelled on the server, rolled back)."""
        stop = ReadStop()
        work = functools.partial(self._work, tenant_id, fn, write, remaining(), stop)
        try:
            return await run_sync_interruptible(work, interrupt=stop.trip, limiter=self.limiter)
        except _driver.StatementCancelledError:
            # The statement timeout is the caller's deadline: when the server's timer fires before
            # the caller's cancel scope wakes this task (a loaded host), the deadline has passed
            # all the same, and the caller's cancellation is what it gets, as from the interrupt.
            await anyio.lowlevel.checkpoint_if_cancelled()
            raise

    def _work(
        self,
        tenant_id: str | None,
        fn: Callable[[Session], T],
        write: bool,
        timeout: float | None,
        stop: Stop,
    ) -> T:
        with self.transaction(tenant_id, write=write, timeout=timeout, stop=stop) as session:
            return fn(session)

    def close(self) -> None:
        """Close every connection; later use raises BrokerClosedError."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerClosedError(f"database {self.where} is closed")


def remaining() -> float | None:
    """Seconds left before the caller's effective deadline; None without one."""
    deadline = anyio.current_effective_deadline()
    if math.isinf(deadline):
        return None
    return max(0.0, deadline - anyio.current_time())


def _cancel(conn: Connection[TupleRow]) -> None:
    """Ask the server to cancel the connection's running statement (a stop's interrupt)."""
    with contextlib.suppress(Exception):  # a connection already gone has nothing to cancel
        conn.cancel_safe(timeout=CANCEL_TIMEOUT)


def _settle(conn: Connection[TupleRow], *, write: bool) -> None:
    """The next transaction's kind, which its BEGIN states (no round trip of its own): a read is
    one snapshot (REPEATABLE READ, READ ONLY), a write the server's default (READ COMMITTED)."""
    conn.isolation_level = None if write else _driver.psycopg().IsolationLevel.REPEATABLE_READ
    conn.read_only = None if write else True


def _begin(conn: Connection[TupleRow], *, timeout: float | None) -> None:
    """The transaction's statement timeout."""
    if timeout is not None:
        # 0 would mean "no timeout": a unit started at its deadline gets the smallest one.
        ms = max(1, math.ceil(timeout * 1000))
        conn.execute(f"SET LOCAL statement_timeout = {ms}".encode())


def _configure(conn: Connection[TupleRow]) -> None:
    """Every pooled connection: our schema first, the application role, vectors as numpy."""
    conn.execute(f"SET search_path = {_schema.SEARCH_PATH}".encode())
    conn.execute(f"SET ROLE {_schema.APP_ROLE}".encode())
    _driver.pgvector_psycopg().register_vector(conn)


def _prepare(url: str, where: str, *, migrate: bool, connect_timeout: float) -> None:
    """One direct connection before the pool: its errors say why (refused, bad password,
    schema too new), where a pool would only time out."""
    pg = _driver.psycopg()
    with pg.connect(url, autocommit=True, connect_timeout=max(1, math.ceil(connect_timeout))) as conn:
        try:
            if migrate:
                _schema.migrate(conn, where)
            elif _schema.check_version(conn, where) < _schema.SCHEMA_VERSION:
                raise _store_error(where, f"schema not migrated to version {_schema.SCHEMA_VERSION}")
            _configure(conn)
        except pg.errors.InsufficientPrivilege as exc:
            raise _store_error(
                where,
                f"{' '.join(str(exc).split())}: the role must be a member of {_schema.APP_ROLE} "
                f"(GRANT {_schema.APP_ROLE} TO <role>, as the schema's owner), and migrating needs the owner",
            ) from exc
        row = conn.execute(
            b"SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        if row is None or row[0]:
            raise _store_error(where, f"role {_schema.APP_ROLE} bypasses row-level security; refused")


def _store_error(where: str, message: str) -> StoreError:
    return StoreError(f"{where}: {message}", source="postgres")
