"""Memory sources: where memories live and how each kind is recalled."""

from __future__ import annotations

from ._schema import ensure_memory_type_column as ensure_memory_type_column
from ._store import Memory as Memory
from ._store import MemoryStore as MemoryStore
from ._store import NewEntry as NewEntry
from ._store import Recalled as Recalled
from ._validate import KINDS as KINDS
from ._validate import MAX_TEXT_CHARS as MAX_TEXT_CHARS

__all__ = [
    "KINDS",
    "MAX_TEXT_CHARS",
    "Memory",
    "MemoryStore",
    "NewEntry",
    "Recalled",
    "ensure_memory_type_column",
]
