"""Tasks and their conversations, in the store's engine.

The one authority on task status (`TaskStateRepository`) and the bodies of past turns
(`ConversationStateRepository`).

Writes are blocking and short (one write transaction of the engine); reads are async and run
in worker threads behind a CapacityLimiter, stopped if the caller is cancelled.
"""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import anyio
import attrs

from broker import FieldError, Namespace, ValidationError, count_errors
from broker.abc import ConversationTurn, TaskRecord

from .storage import _validate
from .storage._engine import ReadStop
from .storage._engine_corpora import TaskRecord as TaskRow
from .storage._engine_corpora import TurnRecord
from .storage._threads import run_sync_interruptible

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from broker.abc import ConversationStateRepository, TaskStateRepository

    from ._store import MemoryStore
    from .storage._engine import Engine, Reader, Writer

T = TypeVar("T")

TASK_STATUSES: tuple[str, ...] = ("active", "completed", "cancelled", "failed")
"""The statuses a task can have; only `completed` tasks appear in history."""

ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
"""The roles of a conversation turn."""

DEFAULT_READ_TOKENS = 4


def task_errors(
    description: object, *, task_id: object = None, status: object = "active", roles: Sequence[object] = ()
) -> list[FieldError]:
    """Every problem `create_task` (and `append_turn`, for turns of these `roles`) would refuse
    these fields for (whether the id exists apart); nothing is read or written."""
    errors = _validate.text_errors("description", description)
    errors += _validate.id_errors("task_id", task_id)
    errors += _validate.choice_errors("status", status, TASK_STATUSES, optional=False)
    for role in roles:
        errors += _validate.choice_errors("role", role, ROLES, optional=False)
    return errors


MAX_HISTORY_LIMIT = 1000


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _task(row: TaskRow) -> TaskRecord:
    return TaskRecord(task_id=row[0], description=row[1], status=row[2], created_at=row[3], updated_at=row[4])


@attrs.define(eq=False)
class SqliteTaskRepository:
    """Tasks and conversation turns of every namespace, in the store's engine.

    Implements `broker.abc.TaskStateRepository` and `broker.abc.ConversationStateRepository`.
    Does not own the engine: whoever opened it closes it.
    """

    _engine: Engine
    _limiter: anyio.CapacityLimiter = attrs.field(factory=lambda: anyio.CapacityLimiter(DEFAULT_READ_TOKENS))

    @classmethod
    def from_store(cls, store: MemoryStore) -> SqliteTaskRepository:
        """Return the repository of the store's file."""
        return cls(store.engine)

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
        _validate.raise_if(task_errors(description, task_id=task_id, status=status))
        tid = task_id or str(uuid.uuid4())
        now = _now()
        with self._engine.write() as conn:
            ns_id = conn.ensure_namespace(namespace)
            if self._exists(conn, ns_id, tid):
                raise ValidationError.single(
                    "task_id", "exists", f"task {tid!r} already exists in {namespace}"
                )
            conn.tasks.create(ns_id, TaskRow(tid, description, status, now, now))
        return tid

    def set_status(self, task_id: str, status: str, *, namespace: Namespace) -> None:
        """Change a task's status; ValidationError on an unknown status or task."""
        _validate.raise_if(_validate.choice_errors("status", status, TASK_STATUSES, optional=False))
        with self._engine.write() as conn:
            ns_id = conn.namespace_id(namespace)
            updated = ns_id is not None and conn.tasks.set_status(ns_id, task_id, status=status, at=_now())
            if not updated:
                raise _unknown_task(task_id, namespace)

    def append_turn(self, task_id: str, role: str, text: str, *, namespace: Namespace) -> None:
        """Append one conversation turn to a task; ValidationError on bad input or unknown task."""
        errors = _validate.choice_errors("role", role, ROLES, optional=False)
        errors += _validate.text_errors("text", text)
        _validate.raise_if(errors)
        now = _now()
        with self._engine.write() as conn:
            ns_id = conn.namespace_id(namespace)
            if ns_id is None or not self._exists(conn, ns_id, task_id):
                raise _unknown_task(task_id, namespace)
            conn.tasks.append_turn(ns_id, TurnRecord(task_id, role, text, now))

    def delete_task(self, task_id: str, *, namespace: Namespace) -> bool:
        """Remove a task and its conversation turns; return whether it existed."""
        with self._engine.write() as conn:
            ns_id = conn.namespace_id(namespace)
            return ns_id is not None and conn.tasks.delete(ns_id, task_id)

    @staticmethod
    def _exists(conn: Writer, ns_id: int, task_id: str) -> bool:
        return conn.tasks.get(ns_id, task_id) is not None

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

    async def _read(self, fn: Callable[[Reader], T]) -> T:
        stop = ReadStop()

        def work() -> T:
            with self._engine.read(stop) as conn:
                return fn(conn)

        return await run_sync_interruptible(work, interrupt=stop.trip, limiter=self._limiter)


def _unknown_task(task_id: str, namespace: Namespace) -> ValidationError:
    return ValidationError.single("task_id", "unknown", f"no task {task_id!r} in {namespace}")


def _get_task(conn: Reader, *, task_id: str, namespace: Namespace) -> TaskRecord | None:
    ns_id = conn.namespace_id(namespace)
    row = None if ns_id is None else conn.tasks.get(ns_id, task_id)
    return None if row is None else _task(row)


def _completed(conn: Reader, *, namespace: Namespace, limit: int) -> list[TaskRecord]:
    ns_id = conn.namespace_id(namespace)
    return [] if ns_id is None else [_task(r) for r in conn.tasks.completed(ns_id, limit=limit)]


def _turns(conn: Reader, *, task_id: str, namespace: Namespace) -> list[ConversationTurn]:
    ns_id = conn.namespace_id(namespace)
    rows = [] if ns_id is None else conn.tasks.turns(ns_id, task_id)
    return [
        ConversationTurn(task_id=r.task_id, role=r.role, text=r.text, created_at=r.created_at) for r in rows
    ]


if TYPE_CHECKING:

    def _conforms(repo: SqliteTaskRepository) -> tuple[TaskStateRepository, ConversationStateRepository]:
        return repo, repo  # mypy checks both protocols here
