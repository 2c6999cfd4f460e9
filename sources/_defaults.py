"""The default wiring of one store's sources, in registration order, and all its writers."""

from __future__ import annotations

import decimal
import numbers
from typing import TYPE_CHECKING

import attrs

from broker import RECALL_MIN_SCORE, ConfigError, count_errors

from ._abstraction import AbstractionSource, FactWriter
from ._consolidated import ConsolidatedSource, KnowledgeWriter
from ._graphs import GraphSource, GraphWriter
from ._memorules import MemorulesSource
from ._neurons import NeuronSource, NeuronWriter
from ._past_tasks import PastTaskSource
from ._results import DEFAULT_RESULT_CACHE, ResultCache
from ._source_base import ReaderSource
from ._store_reader import StoreReader
from ._store_source import PersonaSource, StoreSource

if TYPE_CHECKING:
    import anyio

    from broker.abc import Source

    from ._store import MemoryStore

DEFAULT_SOURCES: tuple[str, ...] = (
    "store",
    "neurons",
    "graphs",
    "abstraction",
    "consolidated",
    "persona",
    "memorules",
    "past_tasks",
)
"""The sources of a store, in registration (and trace) order."""

_SOURCE_TYPES: dict[str, type[ReaderSource]] = {
    cls.name: cls
    for cls in (
        StoreSource,
        NeuronSource,
        GraphSource,
        AbstractionSource,
        ConsolidatedSource,
        PersonaSource,
        MemorulesSource,
        PastTaskSource,
    )
}


def default_sources(
    store: MemoryStore,
    *,
    limiter: anyio.CapacityLimiter | None = None,
    result_cache: int = DEFAULT_RESULT_CACHE,
    min_score: float | numbers.Real | decimal.Decimal = RECALL_MIN_SCORE,
) -> list[Source]:
    """Return the sources of `store`, in `DEFAULT_SOURCES` order.

    They share one reader. Their reads run in the store's read lane (`MemoryStore.read_lane`:
    the engine's `read_threads`, one worker thread for SQLite, the pool's connections for
    PostgreSQL; reads queued at once run back to back), or, given a `limiter`, in anyio's
    worker threads behind it, never more at once than its tokens. The reader keeps the sources' last
    `result_cache` answers (0: none), so a repeated query on an unchanged namespace is
    answered from memory; any write to the namespace invalidates them. Closing the sources
    does not close the store.

    Each source returns only candidates at or above `min_score` (default: the one floor,
    RECALL_MIN_SCORE, which the selector applies anyway), and nothing when the task's gate is
    under it (but for graph facts, which have their own evidence). It may only be lowered, to
    see below-floor candidates (`context-broker explain` passes 0): a higher one would silently
    raise the floor the trace reports. Any real number will do (an int, a Fraction, a Decimal);
    each source gets it as a float.
    """
    _check_options(result_cache, min_score)
    results = ResultCache(result_cache) if result_cache else None
    reader = StoreReader(store=store, limiter=limiter, results=results)
    floor = float(min_score)
    return [
        cls(reader, store=store, min_score=floor)
        if issubclass(cls, StoreSource)
        else cls(reader, min_score=floor)
        for cls in (_SOURCE_TYPES[name] for name in DEFAULT_SOURCES)
    ]


def _check_options(result_cache: int, min_score: object) -> None:
    """ConfigError naming every bad option of `default_sources`."""
    problems = [
        f"result_cache {e.message}"
        for e in count_errors("result_cache", result_cache, minimum=0, maximum=None)
    ]
    if (
        isinstance(min_score, bool)
        or not isinstance(min_score, numbers.Real | decimal.Decimal)
        or not 0.0 <= float(min_score) <= RECALL_MIN_SCORE
    ):
        problems.append(
            f"min_score must be a number in [0, {RECALL_MIN_SCORE}] (RECALL_MIN_SCORE), got {min_score!r}"
        )
    if problems:
        raise ConfigError("; ".join(problems))


@attrs.frozen
class Writers:
    """The write APIs of every source kind of one store (entries: the store itself)."""

    neurons: NeuronWriter
    graphs: GraphWriter
    facts: FactWriter
    knowledge: KnowledgeWriter

    @classmethod
    def for_store(cls, store: MemoryStore) -> Writers:
        """Return the writers of `store`."""
        return cls(
            neurons=NeuronWriter(store),
            graphs=GraphWriter(store),
            facts=FactWriter(store),
            knowledge=KnowledgeWriter(store),
        )
