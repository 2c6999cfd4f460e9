"""A store's reads for its sources: blocking reads in the store's read lane, interruptible
at the deadline, the turn's gate read once and shared, the task's vector embedded once."""

from __future__ import annotations

import functools
import itertools
import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
import anyio.lowlevel
import attrs
import numpy as np

from broker import Candidate, Namespace
from broker.log import get_logger

from ._results import ResultCache
from ._singleflight import SingleFlight, interruptible
from .embedding._checked import WrappedEmbedder
from .relevance._relevance import Reference
from .relevance._scorer import Scorer
from .storage import _analysis
from .storage._engine import CORPORA, ReadStop
from .storage._threads import run_sync_interruptible

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence

    import numpy.typing as npt

    from broker.abc import Embedder, SourceRequest

    from ._store_view import StoreView
    from .storage._engine import Reader


T = TypeVar("T")

logger = get_logger(__name__)


@attrs.define(eq=False)
class StoreReader:
    """Run blocking reads of one store in worker threads: the store's read lane
    (`MemoryStore.read_lane`: its engine's `read_threads`, queued reads run back to back), or,
    given a `limiter`, anyio's worker threads behind it.

    All the sources of the store share it. The caller's cancel scope owns time: on
    cancellation the running statement is interrupted and the call returns once the thread
    is done; a read still queued never runs.

    It also holds what the sources of a store share: the store's embedder behind a small
    cache of query vectors, so the sources embed one task once, not once each; and the
    sources' answers across turns (`results`, None: every turn reads afresh), kept until the
    namespace is written (`sources._results`).
    """

    store: StoreView
    limiter: anyio.CapacityLimiter | None = None
    results: ResultCache | None = attrs.field(factory=ResultCache)
    _queries: QueryCache | None = attrs.field(default=None, init=False)
    _embedding: dict[tuple[int, str], anyio.Event] = attrs.field(factory=dict, init=False)
    _gates: dict[tuple[int, int], _PendingGate] = attrs.field(factory=dict, init=False)
    _warm_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _warmed: bool = attrs.field(default=False, init=False)

    async def warm(self) -> None:
        """Warm the store once for all the sources sharing this reader (`MemoryStore.warm`).

        Runs in a worker thread with no deadline: the sources call it when they open.
        """
        await anyio.to_thread.run_sync(self._warm_once, limiter=self.limiter)  # None: anyio's default

    def _warm_once(self) -> None:
        with self._warm_lock:
            if not self._warmed:
                self.store.warm()
                if self.results is not None:
                    self.store.engine.change_stamp(wait=True)  # opens what the stamp needs, here
                self._warmed = True

    def kept(self, key: Hashable) -> Sequence[Candidate] | None:
        """A source's answer kept at the database's current change stamp (nothing committed
        since it was read), without a worker thread: one statement that never waits."""
        if self.results is None or self.store.engine.closed:
            return None
        stamp = self.store.engine.change_stamp()
        return None if stamp is None else self.results.stamped(key, stamp)

    def stamp(self) -> int | None:
        """The store's change stamp now (`Engine.change_stamp`), None if unknown; from a worker
        thread, which may wait for the stamp's connection."""
        return self.store.engine.change_stamp(wait=True)

    @property
    def embedder(self) -> QueryCache | None:
        """The store's embedder, caching query embeddings and a turn's small batches
        (`QueryCache`); None if lexical."""
        if self.store.embedder is None:
            return None
        if self._queries is None or self._queries.inner is not self.store.embedder:
            self._queries = QueryCache(self.store.embedder)
        return self._queries

    async def embed_ahead(self, task: str, namespace: Namespace | None = None) -> None:
        """Embed a dense turn's task in a worker thread of its own, once for the sources that
        ask together, before their reads queue in the lane: the model runs beside the lane
        (it releases the GIL), not in it, so another turn's reads go on meanwhile. The reads
        then find the vector in the query cache. A task without an informative term is never
        embedded (no text can score for it).

        Given the `namespace` (a hybrid turn), the task's lexical retrieval there
        (`MemoryStore.lexical_on`), which needs no vector, runs in the lane meanwhile, so the
        turn's reference is left only its dense part once the vector is there."""
        queries = self.embedder
        if queries is None or queries.holds(task) or not _analysis.query_terms(task):
            return
        key = (threading.get_ident(), task)  # an event belongs to its loop, and a loop to its thread
        pending = self._embedding.get(key)
        if pending is not None:
            await pending.wait()
            return
        self._embedding[key] = done = anyio.Event()
        # The model's error is carried out of the task group by hand, so that the source (and
        # the breaker behind it) gets it as raised, not wrapped in an ExceptionGroup.
        failure: Exception | None = None
        try:
            async with anyio.create_task_group() as tg:
                if namespace is not None:
                    tg.start_soon(self._lexical_ahead, task, namespace)
                try:
                    # A cancelled turn does not wait for the model: the thread only fills the cache.
                    await anyio.to_thread.run_sync(queries.embed, [task], abandon_on_cancel=True)
                except Exception as exc:  # noqa: BLE001 - re-raised below, outside the task group
                    failure = exc
                    tg.cancel_scope.cancel()  # the early lexical fill is of no use now
        finally:
            del self._embedding[key]
            done.set()
        if failure is not None:
            raise failure

    async def gated(
        self,
        request: SourceRequest,
        read: Callable[[Reader], T],
        wants: Callable[[Gate], bool],
    ) -> tuple[Gate | None, T | None]:
        """The task's gate in the request's namespace, read once for the sources that ask
        together, in one read with theirs: the first queues one job that reads the gate and its
        own `read` and then the `read` of every source that joined before the job started and
        `wants` it at that gate (it reaches the source's floor, or the source scores on evidence
        of its own); each gets (gate, its answer), or (gate, None) when it did not want it; one
        that asks once
        the job has started waits for it and gets (gate, None). The gate is None when that job
        failed (the first meets the error; the others then read on their own); a joined
        source's own read failing raises in that source alone.

        The sources that ask together are those given the very same request object, as a
        selector gives one turn's sources: an equal request of another turn, which may come
        after a commit the first's read did not see, never waits on it.

        A source whose every candidate is scored against the namespace's reference returns
        nothing below its floor's gate, so when the gate is closed (most turns) the others
        answer without a read of their own (`keep` their empty answers), and when it is open
        the turn's gated sources still take one trip through the read lane between them, not
        one each; they score against the reference the gate's read computed
        (`MemoryStore.scorer_on`)."""
        # By identity: the entry holds its request, so no other object can take its id meanwhile.
        key = (threading.get_ident(), id(request))
        pending = self._gates.get(key)
        if pending is not None:
            return await pending.join(_Rider(read, wants))
        self._gates[key] = mine = _PendingGate(request)
        try:
            for _ in range(JOIN_CHECKPOINTS):  # the turn's other gated sources, dispatched together
                await anyio.lowlevel.checkpoint()
            mine.started = True
            job = functools.partial(self._read_and_gate, read, request, tuple(mine.riders))
            found, mine.gate = await self.run(job)
        finally:
            del self._gates[key]
            mine.done.set()
        return mine.gate, found

    def _read_and_gate(
        self, read: Callable[[Reader], T], request: SourceRequest, riders: Sequence[_Rider[Any]], conn: Reader
    ) -> tuple[T, Gate]:
        stamp = None if self.results is None else self.stamp()  # first: the gate is never older
        found = read(conn)
        gate = self._gate_on(conn, request, stamp)
        for rider in riders:
            if rider.wants(gate):
                rider.run(conn)
                if rider.error is not None:
                    # The connection may be unusable now (PostgreSQL aborts the transaction at a
                    # failed statement): the riders after it read on their own.
                    break
        return found, gate

    def _gate_on(self, conn: Reader, request: SourceRequest, stamp: int | None) -> Gate:
        ns_id = conn.namespace_id(request.namespace)
        if ns_id is None or not self.store.profile_on(conn, ns_id, request.task).terms:
            return Gate(qpp=0.0, stamp=stamp)
        scorer = self.scorer(conn, ns_id, request.task, request.mode)
        qpp = 0.0 if scorer.abstains else scorer.qpp
        ref = scorer.reference
        return Gate(qpp=qpp, stamp=stamp, considered=considered(ref), names_nodes=ref.names_nodes)

    def keep(self, key: Hashable, stamp: int | None, answer: Sequence[Candidate]) -> None:
        """Keep a source's answer read at change stamp `stamp` (None: unknown, not kept), which
        `kept` then serves until anything is committed."""
        if self.results is not None and stamp is not None:
            self.results.stamp(key, stamp, answer)

    async def _lexical_ahead(self, task: str, namespace: Namespace) -> None:
        """Fill the store's lexical retrieval of `task` in `namespace`; a failure is only logged
        (at debug): the read that needs the retrieval computes it again and meets the error."""
        try:
            await self.run(functools.partial(_lexical_on, self.store, task, namespace))
        except Exception as exc:  # noqa: BLE001 - an early fill; the source's own read reports
            logger.debug("store.lexical_ahead.failed", error=type(exc).__name__)

    def scorer(self, conn: Reader, ns_id: int | None, task: str, mode: str | None) -> Scorer:
        """Return the calibrated scorer of a task in the request's mode (default: the store's),
        with the namespace's shared reference."""
        return self.store.scorer_on(conn, ns_id, task, mode=mode or self.store.mode, embedder=self.embedder)

    async def run(self, fn: Callable[[Reader], T]) -> T:
        """`fn(reader)` on a snapshot of the store, in a worker thread, stopped at cancellation."""
        stop = ReadStop()
        work = functools.partial(self._work, fn, stop)
        if self.limiter is None:
            return await self.store.read_lane.run(work, interrupt=stop.trip)
        return await run_sync_interruptible(work, interrupt=stop.trip, limiter=self.limiter)

    def _work(self, fn: Callable[[Reader], T], stop: ReadStop) -> T:
        with self.store.engine.read(stop) as conn, interruptible(lambda: stop.tripped):
            return fn(conn)


@attrs.frozen
class Gate:
    """A task's gate in a namespace (`StoreReader.gated`)."""

    qpp: float
    """`Scorer.qpp`; 0 when no text can score (no namespace, no informative term)."""
    stamp: int | None
    """The store's change stamp read first (None: unknown, or the reader keeps no answers)."""
    considered: frozenset[tuple[int, int]] = frozenset()
    """The memories the turn's shared retrieval considered, as (corpus, rowid)
    (`considered`): what every gated source reports to the trace."""
    names_nodes: bool = False
    """Whether the task names a graph node of the namespace (`Reference.names_nodes`)."""


def considered(ref: Reference) -> frozenset[tuple[int, int]]:
    """The distinct memories the turn's shared retrieval considered, as (corpus, rowid): every
    corpus's lexical hits and nearest vectors the reference read (`Reference.lexical_hits`,
    `dense_hits`, the first `Reference.depth` of each), whether or not a source returns them.
    From the reference's arrays: no read of its own."""
    keys: set[tuple[int, int]] = set()
    for runs in (ref.lexical_hits, ref.dense_hits):
        for corpus, run in zip(CORPORA, runs, strict=False):
            keys.update(zip(itertools.repeat(corpus), run.rowids[: ref.depth].tolist()))
    return frozenset(keys)


JOIN_CHECKPOINTS = 2
"""Checkpoints the first gated source of a turn yields before it queues the turn's gate read,
so that the turn's other gated sources, dispatched at the same moment, join that read: one
to let them run up to their own `gated` call, one more for a source that passed one await
more on its way (a worker taking its job from its channel)."""


@attrs.define(eq=False)
class _Rider(Generic[T]):
    """A source's read that joined a turn's gate read, and what it gave."""

    read: Callable[[Reader], T]
    wants: Callable[[Gate], bool]
    """Whether the read runs once the gate is known (`ReaderSource._reads_at`)."""
    found: T | None = None
    error: Exception | None = None

    def run(self, conn: Reader) -> None:
        """Run the read, keeping its answer or its error for its own source."""
        try:
            self.found = self.read(conn)
        except Exception as exc:  # noqa: BLE001 - raised in the source it belongs to (`answer`)
            self.error = exc

    def answer(self) -> T | None:
        """The read's answer (None: it did not run); its error raised."""
        if self.error is not None:
            raise self.error
        return self.found


@attrs.define(eq=False)
class _PendingGate:
    """A task's gate being read for the sources that wait on it, with the reads that joined it."""

    request: SourceRequest
    done: anyio.Event = attrs.field(factory=anyio.Event)
    gate: Gate | None = None
    started: bool = False
    """Whether the job is queued: a source asking from then on only waits for the gate."""
    riders: list[_Rider[Any]] = attrs.field(factory=list)

    async def join(self, rider: _Rider[T]) -> tuple[Gate | None, T | None]:
        """Wait for the gate, with the rider's read run in its job when it is not queued yet."""
        if self.started:
            await self.done.wait()
            return self.gate, None
        self.riders.append(rider)
        await self.done.wait()
        if self.gate is None:  # the job failed or was cut: the source reads on its own
            return None, None
        return self.gate, rider.answer()


def _lexical_on(store: StoreView, task: str, namespace: Namespace, conn: Reader) -> None:
    ns_id = conn.namespace_id(namespace)
    if ns_id is not None:
        store.lexical_on(conn, ns_id, task)


def ping(conn: Reader) -> None:
    """One cheap read (a namespace looked up): a source's `open` proves the store answers."""
    conn.namespace_id(PING)


PING = Namespace(tenant_id="ping")


class QueryCache(WrappedEmbedder):
    """An Embedder that remembers its last query vectors and the texts a turn scores.

    Concurrent sources asking for the same task wait for one embedding (single flight)
    instead of each computing it. The small batches a turn embeds (`SCORED_BATCH` texts at
    most: the graph nodes a task names, as the gate reads them and as the graph source tells
    them) are remembered text by text, so a node named again, in this turn or a later one, is
    not embedded again; only the texts not kept are embedded, in one batch.
    """

    _SIZE = 64
    _TEXTS = 512
    SCORED_BATCH = 16

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._vectors: SingleFlight[str, npt.NDArray[np.float32]] = SingleFlight(size=self._SIZE)
        self._texts: SingleFlight[str, npt.NDArray[np.float32]] = SingleFlight(size=self._TEXTS)

    def holds(self, text: str) -> bool:
        """Whether the vector of `text` (as a query) is cached."""
        return self._vectors.holds(text)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if len(texts) == 1:
            return self._vectors.get(texts[0], lambda: self.inner.embed(texts))
        if not texts or len(texts) > self.SCORED_BATCH:
            return self.inner.embed(texts)
        missing = [t for t in dict.fromkeys(texts) if not self._texts.holds(t) and not self._vectors.holds(t)]
        fresh = dict(zip(missing, self.inner.embed(missing), strict=True)) if missing else {}
        return np.stack([self._texts.get(t, functools.partial(self._one, fresh, t)) for t in texts])

    def _one(self, fresh: dict[str, npt.NDArray[np.float32]], text: str) -> npt.NDArray[np.float32]:
        """A text's vector, its own copy (not a view keeping the batch alive): from this call's
        batch, else as a query (kept, or embedded alone: evicted since it was looked up)."""
        found = fresh.get(text)
        return (self.embed([text])[0] if found is None else found).copy()
