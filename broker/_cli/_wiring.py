"""The default wiring: the store, every default source and the selector over one SQLite file.
Composition root (imports both `broker` and `sources`), shared by the CLI, demo and canary."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio

from broker import MemorySelector, open_selector
from broker.abc import Source
from sources import MemoryStore, default_sources


async def open_store(path: Path, *, mode: str | None = None, create: bool = True) -> MemoryStore:
    """Open the store off the event loop (it may load the embedding model)."""
    if mode is None:
        return await anyio.to_thread.run_sync(lambda: MemoryStore.open(path, create=create))
    return await anyio.to_thread.run_sync(lambda: MemoryStore.open(path, mode=mode, create=create))


@contextlib.asynccontextmanager
async def open_default_selector(
    store: MemoryStore,
    *,
    deadline: float = 0.1,
    extra_sources: Sequence[Source] = (),
) -> AsyncIterator[MemorySelector]:
    """A selector over every default source of `store` (plus any extra, e.g. a test fake)."""
    sources = [*default_sources(store), *extra_sources]
    async with open_selector(sources, deadline=deadline, mode=store.mode) as selector:
        yield selector
