"""Tasks and their conversations, in the store's SQLite file.

The one authority on task status (`TaskStateRepository`) and the bodies of past turns
(`ConversationStateRepository`).

Writes are blocking and short (one `BEGIN IMMEDIATE` on the single writer); reads are async
and run in worker threads behind a CapacityLimiter, interrupted if the caller is cancelled.
"""

from __future__ import annotations

import functools
import threading
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import anyio
import attrs

from broker import Namespace, ValidationError, count_errors
from broker.abc import ConversationTurn, TaskRecord

from . import _index, _validate
from ._threads import run_sync_interruptible

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Sequence

    from broker.abc import ConversationStateRepository, TaskStateRepository

    from ._db import Database
    from ._store import MemoryStore

T = TypeVar("T")

TASK_STATUSES: tuple[str, ...] = ("active", "completed", "cancelled", "failed")
"""The statuses a task can have; only `completed` tasks appear in history."""

ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
"""The roles of a conversation turn."""

DEFAULT_READ_TOKENS = 4
MAX_HISTORY_LIMIT = 1000
_TASK_COLS = "task_id, description, status, created_at, updated_at"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _task(row: Sequence[str]) -> TaskRecord:
    return TaskRecord(task_id=row[0], description=row[1], status=row[2], created_at=row[3], updated_at=row[4])


@attrs.define(eq=False)
class SqliteTaskRepository:
    """Tasks and conversation turns of every namespace, in the store's Database.

    Implements `broker.abc.TaskStateRepository` and `broker.abc.ConversationStateRepository`.
    Does not own the Database: whoever opened it closes it.
    """

    _db: Database
    _limiter: anyio.CapacityLimiter = attrs.field(factory=lambda: anyio.CapacityLimiter(DEFAULT_READ_TOKENS))

    @classmethod
    def from_store(cls, store: MemoryStore) -> SqliteTaskRepository:
        """Return the repository of the store's file."""
        return cls(store.db)

    # -- writes ---------------------------------------------------------------------------

    def create_task(
        self,
        description: str,
        *,
        namespace: Namespace,
        task_id: str | None = None,
        status: str = "active",
    ) -> str:
        """Create a task; returns its id. ValidationError on bad input or an existing id."""
        errors = _validate.text_errors("description", description)
        errors += _validate.id_errors("task_id", task_id)
        errors += _validate.choice_errors("status", status, TASK_STATUSES, optional=False)
        _validate.raise_if(errors)
        tid = task_id or str(uuid.uuid4())
        now = _now()
        with self._db.write() as conn:
            ns_id = _index.ensure_ns(conn, namespace)
            if self._exists(conn, ns_id, tid):
                raise ValidationError.single(
                    "task_id", "exists", f"task {tid!r} already exists in {namespace}"
                )
            conn.execute(
                "INSERT INTO tasks (ns_id, task_id, description, status, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (ns_id, tid, description, status, now, now),
            )
        return tid

    def set_status(self, task_id: str, status: str, *, namespace: Namespace) -> None:
        """Change a task's status; ValidationError on an unknown status or task."""
        _validate.raise_if(_validate.choice_errors("status", status, TASK_STATUSES, optional=False))
        with self._db.write() as conn:
            ns_id = _index.find_ns(conn, namespace)
            updated = 0
            if ns_id is not None:
                updated = conn.execute(
                    "UPDATE tasks SET status = ?, updated_at = ? WHERE ns_id = ? AND task_id = ?",
                    (status, _now(), ns_id, task_id),
                ).rowcount
            if not updated:
                raise _unknown_task(task_id, namespace)

    def append_turn(self, task_id: str, role: str, text: str, *, namespace: Namespace) -> None:
        """Append one conversation turn to a task; ValidationError on bad input or unknown task."""
        errors = _validate.choice_errors("role", role, ROLES, optional=False)
        errors += _validate.text_errors("text", text)
        _validate.raise_if(errors)
        now = _now()
        with self._db.write() as conn:
            ns_id = _index.find_ns(conn, namespace)
            if ns_id is None or not self._exists(conn, ns_id, task_id):
                raise _unknown_task(task_id, namespace)
            conn.execute(
                "INSERT INTO conversation_turns (ns_id, task_id, role, text, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (ns_id, task_id, role, text, now),
            )
            conn.execute(
                "UPDATE tasks SET updated_at = ? WHERE ns_id = ? AND task_id = ?", (now, ns_id, task_id)
            )

    def delete_task(self, task_id: str, *, namespace: Namespace) -> bool:
        """Remove a task and its conversation turns; return whether it existed."""
        with self._db.write() as conn:
            ns_id = _index.find_ns(conn, namespace)
            if ns_id is None or not self._exists(conn, ns_id, task_id):
                return False
            conn.execute("DELETE FROM conversation_turns WHERE ns_id = ? AND task_id = ?", (ns_id, task_id))
            conn.execute("DELETE FROM tasks WHERE ns_id = ? AND task_id = ?", (ns_id, task_id))
        return True

    @staticmethod
    def _exists(conn: sqlite3.Connection, ns_id: int, task_id: str) -> bool:
        row = conn.execute("SELECT 1 FROM tasks WHERE ns_id = ? AND task_id = ?", (ns_id, task_id)).fetchone()
        return row is not None

    # -- reads (async, worker threads) ----------------------------------------------------

    async def get_task(self, task_id: str, *, namespace: Namespace) -> TaskRecord | None:
        """Return the task, or None if it is unknown in this namespace."""
        return await self._read(functools.partial(_get_task, task_id=task_id, namespace=namespace))

    async def completed_tasks(self, *, namespace: Namespace, limit: int) -> list[TaskRecord]:
        """Return completed tasks, most recently updated first."""
        errors = count_errors("limit", limit, minimum=0, maximum=MAX_HISTORY_LIMIT)
        if errors:
            raise ValidationError(errors)
        if limit == 0:
            return []
        return await self._read(functools.partial(_completed, namespace=namespace, limit=limit))

    async def turns(self, task_id: str, *, namespace: Namespace) -> list[ConversationTurn]:
        """Return the task's turns, oldest first."""
        return await self._read(functools.partial(_turns, task_id=task_id, namespace=namespace))

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        holder: dict[str, sqlite3.Connection] = {}
        lock = threading.Lock()

        def work() -> T:
            with self._db.read() as conn:
                with lock:
                    holder["conn"] = conn
                try:
                    return fn(conn)
                finally:
                    with lock:
                        holder.clear()

        def interrupt() -> None:
            with lock:
                conn = holder.get("conn")
                if conn is not None:
                    conn.interrupt()

        return await run_sync_interruptible(work, interrupt=interrupt, limiter=self._limiter)


def _unknown_task(task_id: str, namespace: Namespace) -> ValidationError:
    return ValidationError.single("task_id", "unknown", f"no task {task_id!r} in {namespace}")


def _get_task(conn: sqlite3.Connection, *, task_id: str, namespace: Namespace) -> TaskRecord | None:
    ns_id = _index.find_ns(conn, namespace)
    if ns_id is None:
        return None
    row = conn.execute(
        f"SELECT {_TASK_COLS} FROM tasks WHERE ns_id = ? AND task_id = ?", (ns_id, task_id)
    ).fetchone()
    return None if row is None else _task(row)


def _completed(conn: sqlite3.Connection, *, namespace: Namespace, limit: int) -> list[TaskRecord]:
    ns_id = _index.find_ns(conn, namespace)
    if ns_id is None:
        return []
    rows = conn.execute(
        f"SELECT {_TASK_COLS} FROM tasks WHERE ns_id = ? AND status = 'completed' "
        "ORDER BY updated_at DESC, task_id LIMIT ?",
        (ns_id, limit),
    ).fetchall()
    return [_task(r) for r in rows]


def _turns(conn: sqlite3.Connection, *, task_id: str, namespace: Namespace) -> list[ConversationTurn]:
    ns_id = _index.find_ns(conn, namespace)
    if ns_id is None:
        return []
    rows = conn.execute(
        "SELECT task_id, role, text, created_at FROM conversation_turns "
        "WHERE ns_id = ? AND task_id = ? ORDER BY rowid",
        (ns_id, task_id),
    ).fetchall()
    return [ConversationTurn(task_id=r[0], role=r[1], text=r[2], created_at=r[3]) for r in rows]


if TYPE_CHECKING:

    def _conforms(repo: SqliteTaskRepository) -> tuple[TaskStateRepository, ConversationStateRepository]:
        return repo, repo  # mypy checks both protocols here
