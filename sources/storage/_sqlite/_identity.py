"""Whose file is this? Our SQLite files carry `PRAGMA application_id`; another program's
database, or a store from newer code, is refused before anything is written to it.

A file is acceptable when it is empty (a new store), marked as ours, or an unmarked store of
an earlier version (user_version 1..3 with our tables), which is marked when it is opened.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sources._exceptions import StoreError

from ._txn import immediate

APPLICATION_ID = 0x63747862
"""`PRAGMA application_id` of a context-broker store: the bytes "ctxb"."""

_OUR_TABLES = frozenset({"namespaces", "entries"})
_SHOWN = 5  # foreign tables named in the error


def check(conn: sqlite3.Connection, path: Path, *, schema_version: int) -> None:
    """Raise StoreError unless the file is empty, ours, or an unmarked store of ours.

    Reads only: nothing has been written when this raises. sqlite3 errors (not a database)
    propagate for the caller to translate.
    """
    app_id: int = conn.execute("PRAGMA application_id").fetchone()[0]
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if app_id not in (0, APPLICATION_ID):
        raise StoreError(f"{path}: not a context-broker database (application_id {app_id:#x}); not opened")
    if app_id == 0 and (tables or version) and not (tables >= _OUR_TABLES and version >= 1):
        shown = ", ".join(sorted(tables)[:_SHOWN]) + (", ..." if len(tables) > _SHOWN else "")
        raise StoreError(
            f"{path}: not a context-broker database (it holds {shown or f'user_version {version}'}); "
            "not opened"
        )
    if version > schema_version:
        raise StoreError(
            f"{path}: schema version {version} is newer than this context-broker supports "
            f"({schema_version}); upgrade context-broker to open it"
        )


def claim(conn: sqlite3.Connection) -> None:
    """Mark a checked file as ours (a new store, or one of an earlier version); idempotent."""
    if conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
        return
    with immediate(conn):
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
