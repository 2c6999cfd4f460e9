"""The storage engine contract kit: an `engine` fixture over every engine (SQLite today; a
PostgreSQL engine adds its parameter here) and the helpers the contract tests share.

`tests/sources/test_engine_contract.py` holds the tests; every one runs on every engine, so
the same writes give the same statistics, candidates, ranks and vectors everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import pytest

from broker import Namespace
from sources.storage import _analysis
from sources.storage._entries import EntryRow
from sources.storage._sqlite import SqliteEngine

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sources.storage._engine import Engine, Writer

ENGINES: Final = ("sqlite",)
"""The engines the contract runs on; an engine without its server or extra skips, saying so."""
NS: Final = Namespace(tenant_id="acme", project_id="web")
OTHER: Final = Namespace(tenant_id="other", project_id="web")
DIM: Final = 8
MODEL: Final = "contract-model"


def _open(kind: str, tmp_path: Path) -> Engine:
    if kind == "sqlite":
        return SqliteEngine.open(tmp_path / "contract.db")
    pytest.skip(f"no {kind} engine in this build")  # pragma: no cover - until another engine exists


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A fresh, empty store on each engine."""
    opened = _open(str(request.param), tmp_path)
    yield opened
    opened.close()


def entry_row(id_: str, text: str, *, kind: str = "note", memory_type: str | None = None) -> EntryRow:
    """An entry as the corpora write it."""
    return EntryRow(
        id=id_,
        kind=kind,
        memory_type=memory_type,
        text=text,
        created_at="2026-01-01T00:00:00+00:00",
        importance=0.5,
        metadata="{}",
    )


def add_entry(w: Writer, ns_id: int, namespace: Namespace, id_: str, text: str) -> int:
    """Insert an entry and index its analysed terms, as the store does; its rowid."""
    rowid = w.entries.insert(ns_id, namespace, entry_row(id_, text))
    w.index_document(ns_id, (0, rowid), _analysis.terms(text))
    return rowid


def unit(seed: int) -> np.ndarray:
    """A deterministic unit vector of DIM float32s."""
    v = np.random.default_rng(seed).standard_normal((1, DIM)).astype(np.float32)
    return v / np.linalg.norm(v)
