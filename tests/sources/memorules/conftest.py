"""The store every memorule test starts from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from memorule_kit import open_store

if TYPE_CHECKING:
    from store_kit import StoreOpener

    from sources import MemoryStore


@pytest.fixture
def store(make_store: StoreOpener) -> MemoryStore:
    """A lexical store with unrelated notes in NS, so term statistics are realistic (on each engine)."""
    return open_store(make_store)
