"""Tests of the memorules source: ranked rules in the memorules block."""

from __future__ import annotations

import pytest
from memorule_kit import (
    NS,
    QUERY,
    write_rule,
)

from broker import (
    RECALL_MIN_SCORE,
    BrokerClosedError,
    SessionContext,
)
from broker.abc import Source, SourceRequest
from sources import (
    MemorulesSource,
    MemoryStore,
)
from sources._store_reader import StoreReader


async def test_source_surfaces_ranked_rules_in_the_memorules_block(store: MemoryStore) -> None:
    """The source returns non-contradicting rules above the floor, ranked (Candidate.rank), with their fields."""
    low = write_rule(store, id="low", confidence="asserted", evidence_signal_id="sig-1")
    high = write_rule(
        store, id="high", confidence="observed", applies_to={"persona": "donna", "scope": "project"}
    )
    write_rule(store, id="other", applies_to={"persona": "texi"})
    source = MemorulesSource(StoreReader(store=store))
    assert isinstance(source, Source)
    assert source.name == "memorules"
    await source.open()
    ctx = SessionContext(persona="donna", scope="project")
    got = await source.fetch(SourceRequest(task=QUERY, namespace=NS, context=ctx))
    assert [c.entry_id for c in got] == [high, low]
    assert all(c.block == "memorules" and c.source == "memorules" for c in got)
    assert all(c.score >= RECALL_MIN_SCORE for c in got)
    assert [c.metadata["memorule_rank"] for c in got] == [c.rank for c in got] == [0, 1]
    assert got[1].metadata["evidence_signal_id"] == "sig-1"
    assert got[0].metadata["applies_to"] == {"persona": "donna", "scope": "project"}
    assert (got[0].metadata["confidence"], got[0].metadata["memorule_kind"]) == (
        "observed",
        "behavioral_rule",
    )
    assert await source.fetch(SourceRequest(task="carol pixel guitar", namespace=NS, context=ctx)) == []
    no_ctx = await source.fetch(SourceRequest(task=QUERY, namespace=NS))
    assert [(c.entry_id, c.rank) for c in no_ctx] == [(high, 0), ("other", 1), (low, 2)]
    await source.aclose()
    with pytest.raises(BrokerClosedError):
        await source.fetch(SourceRequest(task=QUERY, namespace=NS, context=ctx))


async def test_source_honours_typed_requests(store: MemoryStore) -> None:
    """Typed requests keep unclassified rules and rules of the asked types only."""
    plain = write_rule(store, id="plain")
    proc = write_rule(store, id="proc", memory_type="procedural")
    write_rule(store, id="epi", memory_type="episodic")
    source = MemorulesSource(StoreReader(store=store))
    await source.open()
    got = await source.fetch(
        SourceRequest(task=QUERY, namespace=NS, types=("procedural",), context=SessionContext())
    )
    assert sorted(c.entry_id for c in got) == sorted([plain, proc])
    await source.aclose()
