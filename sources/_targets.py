"""What a store target names: a SQLite file (a path, or a `sqlite:///` URL) or a PostgreSQL
server (a `postgresql://` URL). Read by `open_store` (`sources._open`) and by
`MemoryStore.open`, which opens SQLite files only."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from broker import ConfigError

SQLITE_SCHEME: Final = "sqlite:///"
"""`sqlite:///relative.db` or `sqlite:////absolute/path.db` (SQLAlchemy's spelling)."""
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
POSTGRES_NO_FILE: Final = "a PostgreSQL URL names a server, not a file; give a SQLite path here"


_SCHEME = re.compile(r"[a-z][a-z0-9+.-]+://", re.IGNORECASE)
"""A URL scheme: two characters or more, so a drive letter (`C://data/s.db`) is a path."""
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

    ConfigError for a PostgreSQL URL (no file), another URL scheme, an empty target, SQLite's
    special names (`:memory:`, a `file:` URI: each would become a file of that name; a store
    needs a file its reader connections share), a NUL character, or a target that is neither a
    string nor a path. A `Path` (any `os.PathLike`) is taken literally: only a NUL is refused.
    """
    if isinstance(target, os.PathLike):
        return _expanded(Path(os.fsdecode(target)))
    text = _text(target).strip()
    if text.lower().startswith(POSTGRES_SCHEMES):
        msg = f"{redacted(text)}: {POSTGRES_NO_FILE}"
        raise ConfigError(msg)
    if text.lower().startswith(SQLITE_SCHEME):
        text = text[len(SQLITE_SCHEME) :]
    elif _SCHEME.match(text):
        msg = f"{redacted(text)}: unknown store URL scheme (give a path, sqlite:///path or postgresql://...)"
        raise ConfigError(msg)
    if not text:
        msg = "the store's path is empty"
        raise ConfigError(msg)
    if text == ":memory:" or text.lower().startswith("file:"):
        msg = f"{text!r}: SQLite's special names are not store paths (the store needs a file; give a path)"
        raise ConfigError(msg)
    return _expanded(Path(text))


def _text(target: object) -> str:
    """The target as a string; a caller's int, None or bytes is a ConfigError, not a crash."""
    if not isinstance(target, str):
        msg = f"a store target is a path or a URL string, not {type(target).__name__}"
        raise ConfigError(msg)
    return target


def _expanded(path: Path) -> Path:
    """`~` expanded; a NUL character or an unknown `~user` is a ConfigError."""
    if "\0" in str(path):
        msg = "the store's path holds a NUL character"
        raise ConfigError(msg)
    try:
        return path.expanduser()
    except RuntimeError as exc:  # "~nobody/x.db": no such user
        msg = f"{path}: {exc}"
        raise ConfigError(msg) from exc


def redacted(url: str) -> str:
    """A URL without its password, for messages (`sources.storage._postgres._driver.redact`)."""
    from .storage._postgres._driver import redact  # noqa: PLC0415 - the PostgreSQL package only when named

    return redact(url)
