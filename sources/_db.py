"""The one SQLite file: a writer connection under a lock (`BEGIN IMMEDIATE`), a pool of
reader connections usable from worker threads, and sqlite3 errors translated to StoreError."""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs

from broker import BrokerClosedError, StoreError
from broker.log import get_logger

from . import _schema

logger = get_logger(__name__)

BUSY_TIMEOUT_MS = 5_000


@contextlib.contextmanager
def translated(path: Path | str) -> Iterator[None]:
    """Turn the errors a bad or damaged file raises into one clear StoreError."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise
        raise StoreError(f"{path}: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a usable SQLite database ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path}: damaged database (undecodable text)") from exc


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


@attrs.define(eq=False)
class Database:
    """Connections to one SQLite file; thread-safe."""

    path: Path
    _writer: sqlite3.Connection
    _write_lock: threading.Lock = attrs.field(factory=threading.Lock)
    _readers: queue.SimpleQueue[sqlite3.Connection] = attrs.field(factory=queue.SimpleQueue)
    _all_readers: list[sqlite3.Connection] = attrs.field(factory=list)
    _pool_lock: threading.Lock = attrs.field(factory=threading.Lock)
    _closed: bool = False

    @classmethod
    def open(cls, path: Path | str) -> Database:
        """Open (creating if absent) and migrate; raises StoreError on a bad file."""
        path = Path(path).expanduser()
        if path.is_dir():
            raise StoreError(f"{path}: is a directory, not a database file")
        with translated(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = _connect(path)
            try:
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
                conn.execute("PRAGMA synchronous = NORMAL")
                _schema.migrate(conn)
            except BaseException:
                conn.close()
                raise
        return cls(path=path, writer=conn)

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (`BEGIN IMMEDIATE`) on the single writer connection."""
        with self._write_lock:
            self._check_open()
            conn = self._writer
            with translated(self.path):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A reader connection of its own for the duration; returned to the pool after."""
        self._check_open()
        try:
            conn = self._readers.get_nowait()
        except queue.Empty:
            with translated(self.path):
                conn = _connect(self.path)
                conn.execute("PRAGMA query_only = ON")
            with self._pool_lock:
                self._all_readers.append(conn)
        try:
            with translated(self.path):
                yield conn
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._readers.put(conn)

    def close(self) -> None:
        """Close every connection; later use raises BrokerClosedError."""
        with self._write_lock, self._pool_lock:
            if self._closed:
                return
            self._closed = True
            for conn in self._all_readers:
                conn.close()
            self._writer.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerClosedError(f"database {self.path} is closed")

    def size_bytes(self) -> int:
        """Bytes on disk, WAL included."""
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += Path(f"{self.path}{suffix}").stat().st_size
        return total
