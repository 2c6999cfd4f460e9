"""The default wiring, in one place: where the store lives and how it is opened, which sources
a turn asks (the CLI, the demo, the canary and the MCP server all ask the same ones), and the
bundled sample data. The composition root: it imports both `broker` and `sources`."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from pathlib import Path

import anyio
import platformdirs

import sources
from broker import RECALL_MIN_SCORE, MemorySelector, open_selector
from broker.abc import Source
from sources import MemoryStore, default_sources

ENV_DB = "CONTEXT_BROKER_DB"
"""The database file every command uses when `--db` is not given."""
ENV_PERSONA = "CONTEXT_BROKER_PERSONA"
"""The persona a memorule write names when the writer gives none (CLI and MCP alike)."""
SAMPLE_DATA = "sample_memories.jsonl"
"""The bundled sample (a fictional team's notes, neurons, facts, knowledge, memorules and
past tasks), in the record format `ingest` reads; package data of `context_broker`."""


def default_db_path() -> Path | str:
    """`$CONTEXT_BROKER_DB` (a path, a `sqlite:///` URL or a PostgreSQL URL), else `memory.db`
    under the user's data directory."""
    env = os.environ.get(ENV_DB)
    if env:
        return sources.store_target(env)
    return Path(platformdirs.user_data_dir("context-broker", appauthor=False)) / "memory.db"


def open_store(
    path: Path | str, *, mode: str | None = None, create: bool = True, durability: str = "normal"
) -> MemoryStore:
    """Open the store a path or URL names (`sources.open_store`) in the given recall mode (the
    store's default when None); blocking. ConfigError for a PostgreSQL URL without the
    `[postgres]` extra."""
    if mode is None:
        return sources.open_store(path, create=create, durability=durability)
    return sources.open_store(path, mode=mode, create=create, durability=durability)


async def open_store_in_thread(
    path: Path | str, *, mode: str | None = None, create: bool = True
) -> MemoryStore:
    """`open_store` off the event loop (it may load the embedding model)."""
    return await anyio.to_thread.run_sync(functools.partial(open_store, path, mode=mode, create=create))


@contextlib.asynccontextmanager
async def open_default_selector(
    store: MemoryStore,
    *,
    deadline: float = 0.1,
    extra_sources: Sequence[Source] = (),
    source_floor: float | None = None,
) -> AsyncIterator[MemorySelector]:
    """A selector over every default source of `store` (plus any extra, e.g. a test fake), in the
    store's recall mode. With `source_floor` the store's own sources return candidates down to it
    (`explain` passes 0 to show below-floor memories); the selector's floor is unchanged."""
    floor = RECALL_MIN_SCORE if source_floor is None else source_floor
    sources = [*default_sources(store, min_score=floor), *extra_sources]
    async with open_selector(sources, deadline=deadline, mode=store.mode) as selector:
        yield selector


def sample_lines() -> list[tuple[int, str]]:
    """The bundled sample's non-blank lines with their 1-based numbers (the one place it is read)."""
    text = resources.files("context_broker").joinpath("data", SAMPLE_DATA).read_text(encoding="utf-8")
    return [(number, line) for number, line in enumerate(text.split("\n"), start=1) if line.strip()]
