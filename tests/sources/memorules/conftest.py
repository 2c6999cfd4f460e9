"""The store every memorule test starts from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from memorule_kit import open_store

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sources import MemoryStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    """A lexical store with unrelated notes in NS, so term statistics are realistic."""
    with open_store(tmp_path) as s:
        yield s
