"""SQLite's change stamp (`Engine.change_stamp`): `PRAGMA data_version` on a connection of
its own, which changes whenever any other connection of any process commits."""

from __future__ import annotations

import sqlite3
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


class ChangeStamp:
    """A number that changes whenever anything is committed to the database, by any
    connection of any process (SQLite's `PRAGMA data_version` on a connection of its own,
    which never writes: every commit is another connection's).

    Reading it is one statement that never waits: the connection has no busy timeout, and a
    read that cannot run at once (the connection in use, the file locked, closed) is None,
    which a caller takes as "unknown" and reads the generations instead.
    """

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def open(self, path: Path) -> None:
        """Open the stamp's connection (blocking: call it where blocking is allowed)."""
        with self._lock:
            if self._conn is None:
                uri = f"{path.resolve().as_uri()}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, timeout=0, check_same_thread=False)

    def read(self, *, wait: bool = False) -> int | None:
        """The current stamp, or None if it cannot be read without waiting (`wait`: a worker
        thread may wait its turn for the connection, never for the file)."""
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            if self._conn is None:
                return None
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:
            return None
        finally:
            self._lock.release()

    def close(self) -> None:
        """Close the connection; later reads are None."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
