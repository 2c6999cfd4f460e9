"""Opening a store by path or URL: which engine a target names (`open_store`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

from broker import ConfigError

from ._store import MemoryStore

if TYPE_CHECKING:
    from broker.abc import Embedder

SQLITE_SCHEME: Final = "sqlite:///"
"""`sqlite:///relative.db` or `sqlite:////absolute/path.db` (SQLAlchemy's spelling)."""
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
POSTGRES_NO_FILE: Final = "a PostgreSQL URL names a server, not a file; give a SQLite path here"


_CONNINFO = re.compile(r"(^|\s)(host|hostaddr|dbname|user|password|port|service)\s*=", re.IGNORECASE)


def store_target(target: str | Path) -> Path | str:
    """What a store target names: the SQLite file (a path, or a `sqlite:///` URL), or a
    PostgreSQL URL as given (`postgresql://` or `postgres://`).

    ConfigError for another URL scheme, a libpq `key=value` string (it would otherwise
    become a file of that name; the message never repeats it: it may hold a password), or
    an empty target.
    """
    if isinstance(target, str) and target.strip().lower().startswith(POSTGRES_SCHEMES):
        return target.strip()
    if isinstance(target, str) and _CONNINFO.search(target):
        msg = "a libpq key=value connection string is not a store target: give postgresql://user@host/db"
        raise ConfigError(msg)
    return store_path(target)


def store_path(target: str | Path) -> Path:
    """The SQLite file a store target names: a path, or a `sqlite:///` URL.

    ConfigError for a PostgreSQL URL (no file), another URL scheme, or an empty target.
    """
    if isinstance(target, Path):
        return target.expanduser()
    text = target.strip()
    if text.lower().startswith(POSTGRES_SCHEMES):
        msg = f"{_redacted(text)}: {POSTGRES_NO_FILE}"
        raise ConfigError(msg)
    if text.lower().startswith(SQLITE_SCHEME):
        text = text[len(SQLITE_SCHEME) :]
    elif "://" in text:
        msg = f"{_redacted(text)}: unknown store URL scheme (give a path, sqlite:///path or postgresql://...)"
        raise ConfigError(msg)
    if not text:
        msg = "the store's path is empty"
        raise ConfigError(msg)
    return Path(text).expanduser()


def open_store(
    target: str | Path,
    *,
    embedder: Embedder | None = None,
    mode: str = "hybrid",
    create: bool = True,
    durability: str = "normal",
) -> MemoryStore:
    """Open the store a path or URL names; blocking (see `MemoryStore.open` for the options).

    A path or `sqlite:///path` opens SQLite, the default engine. `postgresql://...` opens the
    PostgreSQL engine (`sources.storage._postgres.PostgresEngine`: the `[postgres]` extra, ConfigError
    naming it when absent; the schema is migrated on open); `create` and `durability` are
    SQLite's (the server owns its database and its durability).
    """
    resolved = store_target(target)
    if isinstance(resolved, str):
        from .storage._postgres import PostgresEngine  # noqa: PLC0415 - the extra is optional

        return MemoryStore.on(PostgresEngine.open(resolved), embedder=embedder, mode=mode)
    return MemoryStore.open(resolved, embedder=embedder, mode=mode, create=create, durability=durability)


def _redacted(url: str) -> str:
    """A URL without its password, for messages (`sources.storage._postgres._driver.redact`)."""
    from .storage._postgres._driver import redact  # noqa: PLC0415 - the PostgreSQL package only when named

    return redact(url)
