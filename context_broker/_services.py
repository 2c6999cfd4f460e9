"""The opened parts a long-running host shares across requests: one store, its task
repository, one selector over every default source, and one broker."""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, TypeVar

import anyio
import attrs

from broker import ContextBroker, MemorySelector, open_broker
from sources import MemoryStore, SqliteTaskRepository

from .wiring import open_default_selector, open_store_in_thread

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

T = TypeVar("T")


@attrs.define(eq=False)
class Services:
    """What every request of a server works with; opened once, closed once."""

    store: MemoryStore
    tasks: SqliteTaskRepository
    selector: MemorySelector
    broker: ContextBroker
    session_id: str = attrs.field(factory=lambda: str(uuid.uuid4()))
    """This server run's session: the writer id of a memorule write that names none."""

    async def run(self, fn: Callable[[], T]) -> T:
        """Run a blocking store call in a worker thread (SQLite never blocks the event loop)."""
        return await anyio.to_thread.run_sync(fn)


@contextlib.asynccontextmanager
async def open_services(
    db_path: Path | str, *, mode: str | None = None, deadline: float = 0.25, include_text: bool = False
) -> AsyncIterator[Services]:
    """Open the store (loading the model off the event loop), the selector and the broker."""
    store = await open_store_in_thread(db_path, mode=mode)
    try:
        tasks = SqliteTaskRepository.from_store(store)
        async with (
            open_default_selector(store, deadline=deadline) as selector,
            open_broker(
                selector=selector, tasks=tasks, conversations=tasks, include_text=include_text
            ) as broker,
        ):
            yield Services(store=store, tasks=tasks, selector=selector, broker=broker)
    finally:
        store.close()
