"""`SqliteEngine`: the storage engine over one SQLite file (`sources.storage._engine`'s protocols).

The file, its connections and its errors are `sources.storage._sqlite._db.Database`'s; its migrations are
`sources.storage._sqlite._schema`'s. A read is a pooled reader connection (a deferred transaction, so one
snapshot); a write is the single writer's `BEGIN IMMEDIATE`.

Interrupting a read. `Connection.interrupt()` only stops statements that are running when it
is called; a cancellation that lands between two statements of one read (or before the
first) would be lost and the rest of the read would run to completion. So the stop is also
checked by a SQLite progress handler every few hundred VM steps: once tripped, every
statement of that read aborts at once. The connection is detached from the stop (under the
stop's lock) before it goes back to the pool, so a late interrupt never hits another read.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING

import attrs

from sources.storage._read_once import ReadOnce

from ._reader import SqliteReader, SqliteWriter
from ._stamp import ChangeStamp

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sources.storage._engine import Stop

    from ._db import Database

_PROGRESS_STEPS = 500  # VM instructions between two checks of the stop


@attrs.define(eq=False)
class SqliteEngine:
    """The `sources.storage._engine.Engine` of one SQLite file; thread-safe."""

    database: Database
    _stamp: ChangeStamp = attrs.field(factory=ChangeStamp, init=False)

    @classmethod
    def open(cls, path: Path | str, *, create: bool = True, durability: str = "normal") -> SqliteEngine:
        """Open (and migrate) the file: `sources.storage._sqlite._db.Database.open`."""
        from ._db import Database  # noqa: PLC0415 - the module is SQLite's; one import site

        return cls(Database.open(path, create=create, durability=durability))

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self.database.path

    @property
    def location(self) -> str:
        """The file's path, for messages."""
        return str(self.database.path)

    @property
    def durability(self) -> str:
        """`normal` or `full` (`sources.storage._sqlite._db.DURABILITY`)."""
        return self.database.durability

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self.database.closed

    @property
    def vector_dir(self) -> Path:
        """HNSW graphs live beside the file, in `<file>.ann`."""
        return self.database.path.with_name(self.database.path.name + ".ann")

    @property
    def read_threads(self) -> int:
        """One: a turn's source reads are Python work under the GIL, and threads only contend.

        Measured (2 cores, 100k-memory benchmark store, 400 distinct tasks, one turn at a time):
        lexical p50 7.5 ms with one thread against 10.5 ms with eight; hybrid 24.2 against 27.1
        ms; eight concurrent turns 122.7 turns/s with every source complete in 99.3 % of turns
        against 90.8 turns/s and 79 % (the same selector and sources, only the limiter's tokens).
        """
        return 1

    def refresh_statistics(self) -> None:
        """Nothing: the store runs without ANALYZE statistics (its plans follow the schema's
        indexes, measured as they are)."""

    @contextlib.contextmanager
    def read(self, stop: Stop | None = None) -> Iterator[SqliteReader]:
        """One snapshot on a pooled reader connection (`Engine.read`)."""
        with self.database.read() as conn:
            if stop is None:
                yield SqliteReader(conn, snapshot=ReadOnce())
                return
            conn.set_progress_handler(lambda: 1 if stop.tripped else 0, _PROGRESS_STEPS)
            stop.on_trip(conn.interrupt)
            try:
                if stop.tripped:
                    raise sqlite3.OperationalError("interrupted")
                yield SqliteReader(conn, snapshot=ReadOnce())
            finally:
                stop.on_trip(None)
                conn.set_progress_handler(None, 0)

    @contextlib.contextmanager
    def write(self) -> Iterator[SqliteWriter]:
        """One `BEGIN IMMEDIATE` transaction on the single writer (`Engine.write`)."""
        with self.database.write() as conn:
            yield SqliteWriter(conn)

    def close(self) -> None:
        """Close every connection."""
        self._stamp.close()
        self.database.close()

    def change_stamp(self, *, wait: bool = False) -> int | None:
        """`PRAGMA data_version` on the stamp's own connection (`Engine.change_stamp`); the
        connection is opened by the first call that may wait (a worker thread)."""
        if wait and not self.database.closed:
            self._stamp.open(self.database.path)
        return self._stamp.read(wait=wait)

    def size_bytes(self) -> int:
        """The file and its WAL, in bytes."""
        return self.database.size_bytes()

    def schema_version(self) -> int:
        """`PRAGMA user_version`."""
        with self.database.read() as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
