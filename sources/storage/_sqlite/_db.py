"""The one SQLite file: a writer connection under a lock (`BEGIN IMMEDIATE`), a pool of
reader connections usable from worker threads, and sqlite3 errors translated to StoreError."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs

from broker import BrokerClosedError, ConfigError
from broker.log import get_logger
from sources._exceptions import StoreError

from . import _identity, _schema
from ._txn import immediate, rollback

logger = get_logger(__name__)

BUSY_TIMEOUT_MS = 5_000
DURABILITY: tuple[str, ...] = ("normal", "full")
"""`normal` (WAL, synchronous=NORMAL): a commit survives a crash of the process; the last
commits before a power loss or OS crash may be lost. `full` (WAL, synchronous=FULL): every
acknowledged commit is on disk (fsync per commit), so it survives a power loss too."""
_SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}
_FULL_BYTES = 256 * 1024  # less free space than this: a failed write is most likely the full disk


def _one_line(exc: BaseException) -> str:
    # Some SQLite messages quote the damaged schema, newlines and all.
    return " ".join(str(exc).split())


def _io_hint(path: Path | str) -> str:
    """Why a write may have failed as a bare "disk I/O error": SQLite maps some out-of-space
    failures (growing the -shm file) to it; say so when the disk has (nearly) no room left."""
    try:
        free = shutil.disk_usage(Path(path).expanduser().parent).free
    except OSError:
        return ""
    return " (no space left on the device)" if free < _FULL_BYTES else ""


@contextlib.contextmanager
def translated(path: Path | str) -> Iterator[None]:
    """Turn the errors a bad or damaged file raises into one clear, one-line StoreError."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise
        hint = _io_hint(path) if "disk I/O error" in str(exc) else ""
        raise StoreError(f"{path}: {_one_line(exc)}{hint}") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a usable SQLite database ({_one_line(exc)})") from exc
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path}: damaged database (undecodable text)") from exc


def _connect(path: Path, *, create: bool = False) -> sqlite3.Connection:
    # A URI with mode=rw never creates the file: a reader (or a command that only reads)
    # must not leave an empty database behind a mistyped path or a deleted file.
    uri = f"{path.resolve().as_uri()}?mode={'rwc' if create else 'rw'}"
    conn = sqlite3.connect(
        uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _check_target(path: Path, *, create: bool) -> None:
    """Refuse a directory, a missing file when not creating, a store we cannot write; make
    the parent directory when creating."""
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, not a database file")
    if not create and not path.exists():
        raise StoreError(f"{path}: no such database (this command never creates one)")
    if not create and path.stat().st_size == 0:
        # SQLite would take an empty file for an empty database and the migration would fill it.
        raise StoreError(f"{path}: an empty file, not a database (this command never creates one)")
    if create:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{path}: cannot create its directory ({exc.strerror or exc})") from exc
    # Even a reader of a WAL store writes beside it (the -wal and -shm files), and a read-only
    # connection would leave them behind: refuse up front, before anything is touched.
    if path.exists() and not os.access(path, os.W_OK):
        raise StoreError(f"{path}: the file is read-only (a store must be writable, even to read it)")
    if not os.access(path.parent, os.W_OK):
        raise StoreError(f"{path}: its directory is read-only (SQLite keeps {path.name}-wal and -shm there)")


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
    durability: str = "normal"

    @classmethod
    def open(cls, path: Path | str, *, create: bool = True, durability: str = "normal") -> Database:
        """Open and migrate; raises StoreError on a bad file, ConfigError on bad options.

        With `create=False` a missing file is a StoreError. Before anything is written the
        file is checked: another program's database, or a store of a newer schema, is
        refused (StoreError) and left exactly as it was. `durability` is one of DURABILITY.
        """
        if durability not in DURABILITY:
            raise ConfigError(f"durability must be one of {', '.join(DURABILITY)}; got {durability!r}")
        path = Path(path).expanduser()
        _check_target(path, create=create)
        with translated(path):
            conn = _connect(path, create=create)
            try:
                _identity.check(conn, path, schema_version=_schema.SCHEMA_VERSION)
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
                conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[durability]}")
                _identity.claim(conn)
                _schema.migrate(conn)
            except BaseException:
                conn.close()
                raise
        return cls(path=path, writer=conn, durability=durability)

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (`BEGIN IMMEDIATE`) on the single writer connection.

        If it fails, the error raised is the one that made it fail (a full disk stays a full
        disk), never a failure of the rollback after it.
        """
        with self._write_lock:
            self._check_open()
            with translated(self.path), immediate(self._writer) as conn:
                yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A reader connection of its own for the duration, in one snapshot (a deferred
        transaction, rolled back after); returned to the pool after."""
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
                # A deferred transaction: the snapshot is taken at the first statement and kept
                # to the end. The connection is in autocommit mode, where each statement would
                # otherwise see the latest commit.
                conn.execute("BEGIN")
                yield conn
        finally:
            rollback(conn)
            self._release(conn)

    def _release(self, conn: sqlite3.Connection) -> None:
        """Return a reader to the pool; one whose ROLLBACK failed (an interrupt that landed
        while a statement was still active) is still in its snapshot: closed and dropped, so
        no later read finds it mid-transaction and no old snapshot holds back checkpoints."""
        if not conn.in_transaction:
            self._readers.put(conn)
            return
        with self._pool_lock:
            self._all_readers.remove(conn)
        conn.close()

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
