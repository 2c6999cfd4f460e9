from __future__ import annotations

import pytest

from context_broker.shapes import source_type


@pytest.mark.parametrize(
    ("block", "expected"),
    [("memorules", "memorule"), ("history", "past_task"), ("memory", "memory"), ("consolidated", "memory")],
)
def test_a_block_names_its_source_type_as_semantic_recall_does(block, expected):
    """`select --json` and the MCP `select` tool label each block as `semantic_recall` labels a match."""
    assert source_type(block) == expected
