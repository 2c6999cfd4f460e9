"""Versioned migrations of a PostgreSQL database, and the tenant wall (row-level security).

Everything lives in one schema, `context_broker`, whose `schema_version` row says how far it
was migrated. Each step runs in its own transaction under an advisory lock, so two processes
opening a new database at once migrate it once; DDL is transactional in PostgreSQL, so a step
that fails leaves the database at the step before.

The wall. The schema's owner (whoever migrates: a superuser or the database's owner) creates
`context_broker_app`, a role that logs in never, is no superuser and bypasses no policy, and
grants it the tables. Every connection of the engine switches to it (`SET ROLE`), and every
table has a policy that shows and accepts only rows of the tenant the transaction set
(`app.tenant_id`, transaction-local, set before each statement to the tenant of the
namespace the statement is for). A query that forgot its namespace filter still reads only
its own tenant's rows; a connection with no tenant set reads none and writes none. The
upkeep statements that span tenants (listing namespaces, the audit log of every tenant,
vectors to re-embed) lift the wall for themselves only, by name (`ALL_TENANTS`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from broker.log import get_logger
from sources._exceptions import StoreError

from . import _ddl

if TYPE_CHECKING:
    from collections.abc import Callable

    from psycopg import Connection
    from psycopg.rows import TupleRow

logger = get_logger(__name__)

SCHEMA: Final = "context_broker"
APP_ROLE: Final = "context_broker_app"
SEARCH_PATH: Final = f"{SCHEMA}, public"
ALL_TENANTS: Final = "app.all_tenants"
"""Set to 'on' (transaction-local) by the few upkeep statements that span tenants, around
that statement only; every other statement sees one tenant."""
_LOCK: Final = 0x63747862  # pg_advisory_xact_lock key: the bytes "ctxb", as SQLite's application_id

_BOOTSTRAP: Final = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version integer NOT NULL
);
INSERT INTO {SCHEMA}.schema_version (version) VALUES (0) ON CONFLICT DO NOTHING;
"""

_ROLE: Final = f"""
DO $$
BEGIN
    CREATE ROLE {APP_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- roles are per cluster: another database (or process) made it first
END $$;
DO $$
BEGIN
    EXECUTE format('GRANT %I TO %I', '{APP_ROLE}', current_user);
EXCEPTION WHEN duplicate_object OR unique_violation OR invalid_grant_operation THEN
    NULL;
END $$;
"""


def _run(conn: Connection[TupleRow], sql: str) -> None:
    """Run a script of statements (no parameters: one simple query) inside the transaction."""
    conn.execute(sql.encode())


def _v1(conn: Connection[TupleRow]) -> None:
    """The tables, triggers, the application role, the grants and the tenant policies."""
    _run(conn, "CREATE EXTENSION IF NOT EXISTS vector")
    _run(conn, _ddl.TABLES_V1)
    _run(conn, _ddl.FUNCTIONS_V1)
    for table in _ddl.GENERATION_TABLES:
        _run(conn, _ddl.generation_triggers(table))
    _run(conn, _ROLE)
    for table in _ddl.TENANT_TABLES:
        _run(conn, _tenant_policy(table))


def _tenant_policy(table: str) -> str:
    """Row-level security of one table: its rows are the current tenant's, nobody else's
    (but for the upkeep statements that say they read every tenant, `ALL_TENANTS`)."""
    mine = (
        f"tenant_id = current_setting('app.tenant_id', true) OR current_setting('{ALL_TENANTS}', true) = 'on'"
    )
    return f"""
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON {table} USING ({mine}) WITH CHECK ({mine});
"""


def _grants(conn: Connection[TupleRow]) -> None:
    """The application role's rights, granted again after every step (new tables get them)."""
    _run(
        conn,
        f"""
GRANT USAGE ON SCHEMA {SCHEMA} TO {APP_ROLE};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {SCHEMA} TO {APP_ROLE};
REVOKE INSERT, UPDATE, DELETE ON {SCHEMA}.schema_version FROM {APP_ROLE};
""",
    )


MIGRATIONS: Final[tuple[Callable[[Connection[TupleRow]], None], ...]] = (_v1,)
SCHEMA_VERSION: Final = len(MIGRATIONS)


def version(conn: Connection[TupleRow]) -> int:
    """The database's schema version; 0 for a database never migrated."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_version",)).fetchone()
    if row is None or not row[0]:
        return 0
    found = conn.execute(f"SELECT version FROM {SCHEMA}.schema_version").fetchone()
    return 0 if found is None else int(str(found[0]))


def check_version(conn: Connection[TupleRow], where: str) -> int:
    """The schema version; StoreError if newer than this code knows (nothing is changed)."""
    found = version(conn)
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: schema version {found} is newer than this context-broker supports "
            f"({SCHEMA_VERSION}); upgrade context-broker to open it",
            source="postgres",
        )
    return found


def migrate(conn: Connection[TupleRow], where: str) -> int:
    """Bring the database to SCHEMA_VERSION, one transaction per step; returns steps applied.

    `conn` is an autocommit connection of a role that may create schemas, extensions and
    roles (a superuser, or the database owner with CREATEROLE and pgvector installed). A
    database already up to date is only read: an application role may open it.
    """
    if check_version(conn, where) == SCHEMA_VERSION:
        return 0
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        _run(conn, _BOOTSTRAP)
    applied = 0
    for step in range(SCHEMA_VERSION):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            if check_version(conn, where) > step:  # done before, or by another process meanwhile
                continue
            conn.execute(f"SET LOCAL search_path = {SEARCH_PATH}")
            MIGRATIONS[step](conn)
            _grants(conn)
            conn.execute(f"UPDATE {SCHEMA}.schema_version SET version = %s", (step + 1,))
        applied += 1
        logger.debug("store.migrated", engine="postgres", to_version=step + 1)
    return applied
