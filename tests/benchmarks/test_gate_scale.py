"""The gate-at-scale harness: what it counts as served, and the foreign tasks it asks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchmarks import gate_scale
from sources import MemoryStore, NewEntry

if TYPE_CHECKING:
    from pathlib import Path


def test_served_counts_the_tasks_that_recall_a_memory(tmp_path: Path) -> None:
    """A task served is one with a memory above the floor; small talk is not."""
    store = MemoryStore.open(tmp_path / "g.db", mode="lexical")
    try:
        store.add_entries(
            [NewEntry(text="My dentist is Dr. Alvarez on Elm Street.")], namespace=gate_scale.NS
        )
        assert gate_scale._served(store, ["dentist Alvarez Elm Street", "what time is it"]) == 0.5
    finally:
        store.close()


def test_foreign_tasks_are_our_sets_questions() -> None:
    """The foreign tasks are every question of our task-style and personal sets."""
    tasks = gate_scale.foreign_tasks()
    assert len(tasks) == 236
    assert len(set(tasks)) > 200
