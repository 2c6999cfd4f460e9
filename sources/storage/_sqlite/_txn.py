"""Write transactions that end cleanly and never hide why they failed.

SQLite rolls a transaction back by itself on some errors (a full disk, an I/O error): a
second, explicit ROLLBACK then raises "cannot rollback - no transaction is active", which
would replace the error the user needs to see. So roll back only what is still open, and
never raise over the error being handled.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from broker.log import get_logger

logger = get_logger(__name__)


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any; a failure to do so is logged, not raised."""
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        logger.warning("store.rollback_failed", error=str(exc))


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One `BEGIN IMMEDIATE` transaction: committed if the body returns, else rolled back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
