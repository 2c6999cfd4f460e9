"""Migrations and the tenant wall of the PostgreSQL schema, on a real server."""

from __future__ import annotations

import secrets
import threading
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import pytest
from pg_server import require

from sources import StoreError
from sources.storage._postgres import SCHEMA_VERSION, PostgresDatabase, _ddl, _schema

if TYPE_CHECKING:
    from collections.abc import Iterator

psycopg = require("psycopg")


def _catalog(url: str) -> list[tuple[object, ...]]:
    """Every table, column, index, policy and trigger of our schema (a migration's footprint)."""
    with psycopg.connect(url) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'context_broker' ORDER BY 1, 2"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'context_broker' ORDER BY 1"
        ).fetchall()
        policies = conn.execute(
            "SELECT tablename, policyname FROM pg_policies WHERE schemaname = 'context_broker' ORDER BY 1"
        ).fetchall()
        triggers = conn.execute(
            "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'context_broker' "
            "AND NOT t.tgisinternal ORDER BY 1"
        ).fetchall()
    return [*columns, *indexes, *policies, *triggers]


def test_migrations_apply_from_empty(pg_url: str) -> None:
    """A new database is brought to the current version with every table, index and policy."""
    PostgresDatabase.open(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        assert _schema.version(conn) == SCHEMA_VERSION
        tables = {
            r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'context_broker'")
        }
        secured = {
            r[0]
            for r in conn.execute(
                "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'context_broker' AND c.relrowsecurity"
            )
        }
        methods = dict(
            conn.execute(
                "SELECT i.relname, am.amname FROM pg_class i JOIN pg_am am ON am.oid = i.relam "
                "WHERE i.relname IN ('postings_pkey', 'vectors_hnsw')"
            ).fetchall()
        )
    assert tables == {*_ddl.TENANT_TABLES, "schema_version"}
    assert secured == set(_ddl.TENANT_TABLES)
    assert methods == {"postings_pkey": "btree", "vectors_hnsw": "hnsw"}


def test_migrations_are_idempotent(pg_url: str) -> None:
    """Migrating a migrated database applies no step and changes nothing."""
    PostgresDatabase.open(pg_url).close()
    before = _catalog(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert _schema.migrate(conn, "test") == 0
    PostgresDatabase.open(pg_url).close()
    assert _catalog(pg_url) == before


def test_concurrent_opens_migrate_once(pg_url: str) -> None:
    """Processes opening a new database at once migrate it once, and every open succeeds."""
    errors: list[BaseException] = []
    applied: list[int] = []

    def open_one() -> None:
        try:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                applied.append(_schema.migrate(conn, "test"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(applied) == [0, 0, 0, SCHEMA_VERSION]


def test_newer_schema_is_refused_untouched(pg_url: str) -> None:
    """A database migrated by newer code is refused with StoreError, and left as it was."""
    PostgresDatabase.open(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE context_broker.schema_version SET version = 99")
    before = _catalog(pg_url)
    with pytest.raises(StoreError, match="schema version 99 is newer"):
        PostgresDatabase.open(pg_url)
    assert _catalog(pg_url) == before


def test_the_application_role_cannot_bypass_the_wall(pg_url: str) -> None:
    """The role every connection uses is no superuser, bypasses no policy and owns no table."""
    PostgresDatabase.open(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        flags = conn.execute(
            "SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = %s", (_schema.APP_ROLE,)
        ).fetchone()
        owned = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'context_broker' AND tableowner = %s",
            (_schema.APP_ROLE,),
        ).fetchone()
    assert flags == (False, False, False)
    assert owned == (0,)


def test_an_unmigrated_database_is_refused_without_migrate(pg_url: str) -> None:
    """Opening without migrating refuses a database that was never migrated (nothing created)."""
    with pytest.raises(StoreError, match="not migrated"):
        PostgresDatabase.open(pg_url, migrate=False)
    with psycopg.connect(pg_url) as conn:
        assert _schema.version(conn) == 0


@pytest.fixture
def login_role(pg_server: str) -> Iterator[str]:
    """A login role of its own (no superuser, no member of anything), dropped after the test."""
    name = f"agent_{secrets.token_hex(4)}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN")
    try:
        yield name
    finally:
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute(f"DROP ROLE IF EXISTS {name}")


def _as(url: str, role: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname or ''}"))


def test_a_member_of_the_application_role_opens_a_migrated_database(pg_url: str, login_role: str) -> None:
    """An agent's login role, granted the application role, opens the database an admin
    migrated (migrating nothing) and sees only its tenant's rows."""
    PostgresDatabase.open(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"GRANT {_schema.APP_ROLE} TO {login_role}")
    db = PostgresDatabase.open(_as(pg_url, login_role))
    try:
        with db.transaction("alice", write=True) as s:
            s.execute("INSERT INTO namespaces (project_id) VALUES ('p')")
        with db.transaction("bob") as s:
            assert s.execute("SELECT count(*) FROM namespaces").fetchone() == (0,)
    finally:
        db.close()


def test_a_role_outside_the_application_role_is_refused_clearly(pg_url: str, login_role: str) -> None:
    """A login role that was never granted the application role gets a StoreError saying so."""
    PostgresDatabase.open(pg_url).close()
    with pytest.raises(StoreError, match=f"must be a member of {_schema.APP_ROLE}"):
        PostgresDatabase.open(_as(pg_url, login_role))
