"""Opening a store by path or URL: which engine a target names (`open_store`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._store import MemoryStore
from ._targets import store_target

if TYPE_CHECKING:
    from pathlib import Path

    from broker.abc import Embedder


def open_store(
    target: str | Path,
    *,
    embedder: Embedder | None = None,
    mode: str = "hybrid",
    create: bool = True,
    durability: str = "normal",
) -> MemoryStore:
    """Open the store a path or URL names; blocking (see `MemoryStore.open` for the options).

    A path or `sqlite:///path` opens SQLite, the default engine. `postgresql://...` opens the
    PostgreSQL engine (`sources.storage._postgres.PostgresEngine`: the `[postgres]` extra, ConfigError
    naming it when absent; the schema is migrated on open); `create` and `durability` are
    SQLite's (the server owns its database and its durability).
    """
    resolved = store_target(target)
    if isinstance(resolved, str):
        from .storage._postgres import PostgresEngine  # noqa: PLC0415 - the extra is optional

        return MemoryStore.on(PostgresEngine.open(resolved), embedder=embedder, mode=mode)
    return MemoryStore.open(resolved, embedder=embedder, mode=mode, create=create, durability=durability)
