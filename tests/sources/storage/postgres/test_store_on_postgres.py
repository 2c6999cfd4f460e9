"""The store (`MemoryStore`) on `PostgresEngine`: the same memories and tasks recall the same
memories with the same scores as on SQLite, in every recall mode (to 1e-6).

It needs the store over an engine (`MemoryStore.on`, which comes with the engine's branch);
on a tree without it this module skips, saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from pg_server import require

from broker import Namespace
from sources import MemoryStore, NewEntry, open_store
from sources.storage._postgres import PostgresEngine

if TYPE_CHECKING:
    from pathlib import Path

require("psycopg")
if not hasattr(MemoryStore, "on"):
    pytest.skip("the store over an engine (MemoryStore.on) is not in this tree", allow_module_level=True)

ALICE = Namespace(tenant_id="alice", project_id="home")
MEMORIES = (
    "Bought groceries for the week: rice, beans and coffee.",
    "The train to Lyon was delayed by forty minutes on Tuesday.",
    "Finished reading a novel about a lighthouse keeper in Brittany.",
    "Planted tomatoes and basil on the balcony in April.",
    "Fixed the squeaky hinge on the kitchen cabinet with some oil.",
    "Watched a documentary about deep sea creatures and anglerfish.",
    "Booked a dentist appointment for next Thursday at 9.",
    "Practised scales on the piano for half an hour every morning.",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Melanie painted a sunrise over the lake last year.",
    "The database migration to PostgreSQL is planned for the spring release.",
    "Our deploys freeze every Friday after the payment incident.",
    "Alex adopted a grey cat named Pixel from the shelter.",
    "The team lunch moved to the Italian place near the station.",
    "Grandma's recipe for apple pie uses cinnamon and lemon zest.",
)
TASKS = (
    "When was the train to Lyon delayed?",
    "What did Caroline do in May 2023?",
    "Which cat did Alex adopt?",
    "When is the database migration to PostgreSQL?",
    "What does the apple pie recipe need?",
    "thanks!",
)


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_recall_on_postgres_equals_recall_on_sqlite(pg_url: str, tmp_path: Path, mode: str) -> None:
    """Every task recalls the same memories, in the same order, with the same scores."""
    entries = [NewEntry(text=t, id=f"m{i}") for i, t in enumerate(MEMORIES)]
    lite = MemoryStore.open(tmp_path / "m.db", mode=mode)
    pg = MemoryStore.on(PostgresEngine.open(pg_url), mode=mode)  # type: ignore[attr-defined]
    try:
        scored = 0
        for store in (lite, pg):
            store.add_entries(entries, namespace=ALICE)
        for task in TASKS:
            want = lite.recall(task, namespace=ALICE, limit=20, min_score=0.0)
            got = pg.recall(task, namespace=ALICE, limit=20, min_score=0.0)
            assert [r.memory.id for r in got] == [r.memory.id for r in want], task
            assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-6), task
            scored += sum(r.score > 0 for r in want)
        assert scored > 0  # the comparison compared real scores
    finally:
        lite.close()
        pg.close()


def test_open_store_opens_a_postgresql_url(pg_url: str) -> None:
    """`open_store(url)` is the store on the PostgreSQL engine: what it writes, it recalls."""
    with open_store(pg_url, mode="lexical") as store:
        assert isinstance(store.engine, PostgresEngine)
        store.add_entries([NewEntry(text=t, id=f"m{i}") for i, t in enumerate(MEMORIES)], namespace=ALICE)
        found = store.recall("When was the train to Lyon delayed?", namespace=ALICE)
        assert [r.memory.id for r in found][:1] == ["m1"]
