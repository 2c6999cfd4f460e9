"""The real-turns harness: it counts gate-open turns and memories selected as they happened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchmarks import _locomo, real_turns
from sources import MemoryStore

if TYPE_CHECKING:
    from pathlib import Path

TURNS = (
    ("D1:1", "Ana", "Ana: I adopted a grey cat called Pixel last spring."),
    ("D1:2", "Ben", "Ben: My dentist is Dr. Alvarez on Elm Street."),
    ("D1:3", "Ana", "Ana: The office coffee machine is descaled on Fridays."),
)
QA = [
    {"question": "What is the name of Ana's cat?", "category": 1, "evidence": ["D1:1"]},
    {"question": "Who is Ben's dentist?", "category": 1, "evidence": ["D1:2"]},
    {"question": "what time is it", "category": 2, "evidence": []},
    {"question": "an adversarial one the harness skips", "category": 5, "evidence": []},
]


async def test_gate_open_share_and_selected_count_what_the_turns_did(tmp_path: Path) -> None:
    """Three answerable questions, two with their memory in the store and one small talk: every
    turn is timed in each pass, the two that select open their gate, small talk does not."""
    conv = _locomo.Conversation(sample_id="c1", turns=TURNS, raw={"qa": QA})
    store = MemoryStore.open(tmp_path / "t.db", mode="lexical")
    try:
        store.add_entries(conv.entries(), namespace=conv.namespace)
        figures = await real_turns.measure(store, [conv], "lexical", repeats=2)
    finally:
        store.close()
    assert figures["turns"] == 6
    assert figures["gate_open_share"] == round(4 / 6, 4)
    assert figures["gate_open_ms"]["n"] == 4
    assert figures["all_ms"]["n"] == 6
    assert figures["mean_selected"] >= 4 / 6
