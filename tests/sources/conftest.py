"""Stores the source tests share: a namespace with a few unrelated notes, so it has statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest

from broker import Namespace
from broker.testing import background_memories
from sources import MemoryStore, NewEntry
from sources._sqlite import SqliteEngine

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ALICE: Final = Namespace(tenant_id="alice")
FILLER: Final = (
    "Bought groceries for the week: rice, beans and coffee.",
    "The train to Lyon was delayed by forty minutes.",
    "Finished reading a novel about a lighthouse keeper.",
    "Planted tomatoes and basil on the balcony.",
    "Fixed the squeaky hinge on the kitchen cabinet.",
    "Watched a documentary about deep sea creatures.",
    "Booked a dentist appointment for next Thursday.",
    "Practised scales on the piano for half an hour.",
)


def add_filler(store: MemoryStore, namespace: Namespace = ALICE) -> None:
    """Write FILLER into `namespace` as entries f0, f1, ..."""
    store.add_entries([NewEntry(text=t, id=f"f{i}") for i, t in enumerate(FILLER)], namespace=namespace)


@pytest.fixture
def filler_store(tmp_path: Path) -> Iterator[MemoryStore]:
    """A lexical store whose tenant `alice` holds FILLER."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as s:
        add_filler(s)
        yield s


@pytest.fixture
def background_store(tmp_path: Path) -> Iterator[MemoryStore]:
    """A lexical store whose tenant `alice` holds the varied sample notes and FILLER."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as s:
        s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=ALICE)
        add_filler(s)
        yield s


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SqliteEngine]:
    """Open a migrated database file (the vector-index tests)."""
    database = SqliteEngine.open(tmp_path / "v.db")
    yield database
    database.close()
