"""Stores the source tests share, on both engines (`store_kit.ENGINES`): a namespace with a few
unrelated notes, so it has statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest
from store_kit import ENGINES, SQLITE, StoreOpener

from broker import Namespace
from broker.testing import background_memories
from sources import MemoryStore, NewEntry
from sources.storage._sqlite import SqliteEngine

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sources.storage._engine import Engine

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


@pytest.fixture(params=ENGINES)
def engine_name(request: pytest.FixtureRequest) -> str:
    """The storage engine of this run of the test: "sqlite" or "postgres"."""
    name: str = request.param
    return name


@pytest.fixture
def make_store(engine_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StoreOpener]:
    """Open stores on one fresh database of the engine under test (`store_kit`)."""
    target = str(tmp_path / "m.db") if engine_name == SQLITE else request.getfixturevalue("pg_url")
    opener = StoreOpener(engine_name, target)
    yield opener
    opener.close_all()


@pytest.fixture
def filler_store(make_store: StoreOpener) -> MemoryStore:
    """A lexical store whose tenant `alice` holds FILLER."""
    s = make_store(mode="lexical")
    add_filler(s)
    return s


@pytest.fixture
def background_store(make_store: StoreOpener) -> MemoryStore:
    """A lexical store whose tenant `alice` holds the varied sample notes and FILLER."""
    s = make_store(mode="lexical")
    s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=ALICE)
    add_filler(s)
    return s


@pytest.fixture
def engine(make_store: StoreOpener) -> Engine:
    """A migrated engine of the engine under test on a fresh database (the vector-index tests)."""
    return make_store.open_engine()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SqliteEngine]:
    """Open a migrated database file (the tests of the HNSW graphs kept beside it)."""
    database = SqliteEngine.open(tmp_path / "v.db")
    yield database
    database.close()
