from __future__ import annotations

import pytest

from broker import SelectedBlock, SelectionResult, Tally
from context_broker.shapes import result_json, source_type


@pytest.mark.parametrize(
    ("block", "expected"),
    [("memorules", "memorule"), ("history", "past_task"), ("memory", "memory"), ("consolidated", "memory")],
)
def test_a_block_names_its_source_type_as_semantic_recall_does(block, expected):
    """`select --json` and the MCP `select` tool label each block as `semantic_recall` labels a match."""
    assert source_type(block) == expected


def test_select_json_gives_the_memory_counts_its_rate_is_read_from():
    """Past tasks count in `candidates_evaluated` and `selected_count`; `memory_candidates` and
    `memory_cleared` are memories only, and `irrelevant_memory_rate` is read from them."""
    blocks = tuple(
        SelectedBlock(
            entry_id=i,
            source=s,
            sources=(s,),
            block=b,
            score=0.9,
            memory_type=None,
            text="t",
            created_at=None,
        )
        for i, s, b in (("m1", "store", "memory"), ("m2", "store", "memory"), ("t1", "past_tasks", "history"))
    )
    result = SelectionResult(
        blocks=blocks,
        candidates_evaluated=48,
        types_queried=None,
        sources=(),
        memories=Tally(candidates=47, cleared=2),
        history=Tally(candidates=1, cleared=1),
    )
    shown = result_json(result)
    assert (shown["candidates_evaluated"], shown["selected_count"]) == (48, 3)
    assert (shown["memory_candidates"], shown["memory_cleared"]) == (47, 2)
    assert shown["irrelevant_memory_rate"] == pytest.approx(45 / 47)
