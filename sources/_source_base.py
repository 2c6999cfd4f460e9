"""Plumbing shared by the memory sources: interruptible reads, the one score, the lifecycle.

Reads run on a snapshot of the store's engine (`sources._engine.Engine.read`) in a worker
thread that a deadline can stop: the read's `ReadStop` is tripped at cancellation, and the
engine stops the running statement and every later one of that read (SQLite: see
`sources._sqlite._engine`). Every text is scored by the one calibrated `Scorer`; sources
share one open/fetch/aclose.
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import anyio
import anyio.lowlevel
import attrs
import numpy as np

from broker import RECALL_MIN_SCORE, BrokerClosedError, Candidate, Namespace, SourceAnswer
from broker.log import get_logger

from . import _analysis, _batch, _index, _results, _validate
from ._engine import CORPORA, ReadStop, Slot
from ._relevance import DENSE_MODES, LexicalRun, Reference
from ._results import ResultCache
from ._scorer import Relevance, Scorer
from ._singleflight import SingleFlight, interruptible
from ._threads import run_sync_interruptible
from .embedding._checked import WrappedEmbedder

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

    import numpy.typing as npt

    from broker.abc import Embedder, SourceRequest

    from ._engine import Reader
    from ._store import MemoryStore
    from ._vectors import VectorIndex

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

    store: MemoryStore
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
        """The store's embedder, caching single-text (query) embeddings; None if lexical."""
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
        self, request: SourceRequest, read: Callable[[Reader], T], min_score: float
    ) -> tuple[Gate | None, T | None]:
        """The task's gate in the request's namespace, read once for the sources that ask
        together, in one read with theirs: the first queues one job that reads the gate and its
        own `read` and then, when the gate reaches their floor (`min_score`), the `read` of
        every source that joined before the job started; each gets (gate, its answer). A source
        whose floor the gate misses gets (gate, None) and answers nothing; one that asks once
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
            return await pending.join(read, min_score)
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
            if gate.qpp >= rider.min_score:
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
        return Gate(qpp=qpp, stamp=stamp, considered=considered(scorer.reference))

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


@attrs.define(eq=False)
class ReaderSource:
    """The lifecycle every source shares: open, fetch in a worker thread, aclose.

    `open` warms a reader connection before any deadline runs; `aclose` refuses later
    fetches.

    Subclasses set `name` and implement `_fetch_on(conn, request)`, which runs in the worker
    thread. A source never takes a timeout: the caller's scope owns time.
    """

    name: ClassVar[str] = "abstract"
    gated: ClassVar[bool] = False
    """Whether every candidate of this source is scored against the namespace's reference for
    the task (`StoreReader.scorer`), so none can clear the floor when the task's gate is under
    it: such a source reads through `StoreReader.gated`, and when another source's read of the
    turn found the gate closed it answers nothing without a read of its own."""
    _reader: StoreReader
    min_score: float = attrs.field(
        default=RECALL_MIN_SCORE,
        kw_only=True,
        validator=attrs.validators.and_(
            attrs.validators.instance_of(float), attrs.validators.ge(0.0), attrs.validators.le(1.0)
        ),
        on_setattr=attrs.setters.frozen,  # the source's kept answers were read at this floor
    )
    """The floor this source applies to what it returns (a float in [0, 1], fixed at
    construction). A candidate under it could never clear
    the selector's one floor, so it is not built; and when the task's gate is under it, no
    candidate can (a score is qpp x band, band <= 1), so the source reads and scores nothing
    more. Lower it only to see below-floor candidates (`explain` passes 0)."""
    _closed: bool = attrs.field(default=False, init=False)

    @property
    def default_mode(self) -> str:
        """The recall mode of a request that names none: the store's (`broker.abc.ModalSource`)."""
        return self._reader.store.mode

    async def open(self) -> None:
        """Check the store is usable, open a reader connection and warm the store (the model's
        first run, the vector matrices) ahead of the first turn: nothing loads cold inside a
        deadline."""
        self._check_open()
        await self._reader.run(_ping)
        await self._reader.warm()

    async def aclose(self) -> None:
        """Refuse later fetches.

        Reads already running finish (or are interrupted) first, because every fetch waits
        for its own worker thread.
        """
        self._closed = True

    async def fetch(self, request: SourceRequest) -> Sequence[Candidate]:
        """Scored candidates for the task, best first; may raise, never swallows cancellation.

        A repeated request on an unchanged namespace is answered from the reader's cache.
        """
        self._check_open()
        # The mode a request leaves open is the store's: resolved, so both spellings share a key.
        resolved = request if request.mode else attrs.evolve(request, mode=self._reader.store.mode)
        kept = self._reader.kept((self, resolved))
        if kept is not None:
            return kept if isinstance(kept, SourceAnswer) else list(kept)
        if resolved.mode in DENSE_MODES:
            lexical = resolved.namespace if resolved.mode != "dense" else None
            await self._reader.embed_ahead(resolved.task, lexical)
        read = functools.partial(self._answer, request=resolved)
        if not self.gated:
            return await self._reader.run(read)
        # The caller's own request: the sources of one turn share it, not the copies resolved here.
        gate, found = await self._reader.gated(request, read, self.min_score)
        if gate is None:  # the gate's read failed: this source reads on its own
            return found if found is not None else await self._reader.run(read)
        if found is None:
            found = [] if gate.qpp < self.min_score else await self._reader.run(read)
        # The turn's shared retrieval, as every gated source of the turn reports it (one set):
        # counted in the trace, below the floor included, at no read of its own.
        answer = SourceAnswer(candidates=tuple(found), considered=gate.considered)
        self._reader.keep((self, resolved), gate.stamp, answer)  # the gate's stamp: never newer
        return answer

    def _answer(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        cache = self._reader.results
        if cache is None:
            return self._fetch_on(conn, request=request)
        stamp = self._reader.stamp()  # before the generation: an answer is never older than it
        key = (self, self._version(conn, request), request)
        answer = cache.get(key, lambda: tuple(self._fetch_on(conn, request=request)))
        if stamp is not None:
            cache.stamp((self, request), stamp, answer)
        return list(answer)

    def _version(self, conn: Reader, request: SourceRequest) -> _results.Version:
        """What the answer was read from, as write generations (`sources._results`)."""
        return _results.namespace_version(conn, request.namespace)

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        raise NotImplementedError

    def _gate_closed(self, scorer: Scorer) -> bool:
        """Whether no text can reach this source's floor for the scorer's task: every score
        is 0 (`Scorer.abstains`), or the task's gate is under the floor."""
        return scorer.abstains or scorer.qpp < self.min_score

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerClosedError(f"source {self.name!r} is closed")


@attrs.frozen
class Gate:
    """A task's gate in a namespace (`StoreReader.gated`)."""

    qpp: float
    """`Scorer.qpp`; 0 when no text can score (no namespace, no informative term)."""
    stamp: int | None
    """The store's change stamp read first (None: unknown, or the reader keeps no answers)."""
    considered: frozenset[tuple[int, int]] = frozenset()
    """The memories the turn's shared retrieval considered, as (corpus, rowid)
    (`_reference.considered`): what every gated source reports to the trace."""


def considered(ref: Reference) -> frozenset[tuple[int, int]]:
    """The distinct memories the turn's shared retrieval considered, as (corpus, rowid): every
    corpus's lexical hits and nearest vectors (`Reference.lexical_hits`, `dense_hits`), whether
    or not a source returns them. From the reference's arrays: no read of its own."""
    keys: set[tuple[int, int]] = set()
    for runs in (ref.lexical_hits, ref.dense_hits):
        for corpus, run in zip(CORPORA, runs, strict=False):
            keys.update(zip(itertools.repeat(corpus), run.rowids.tolist()))
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
    min_score: float
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

    async def join(self, read: Callable[[Reader], T], min_score: float) -> tuple[Gate | None, T | None]:
        """Wait for the gate, with `read` run in its job when it is not queued yet."""
        if self.started:
            await self.done.wait()
            return self.gate, None
        self.riders.append(rider := _Rider(read, min_score))
        await self.done.wait()
        if self.gate is None:  # the job failed or was cut: the source reads on its own
            return None, None
        return self.gate, rider.answer()


def _lexical_on(store: MemoryStore, task: str, namespace: Namespace, conn: Reader) -> None:
    ns_id = conn.namespace_id(namespace)
    if ns_id is not None:
        store.lexical_on(conn, ns_id, task)


def _ping(conn: Reader) -> None:
    conn.namespace_id(_PING)


_PING = Namespace(tenant_id="ping")


# -- scoring and candidates -----------------------------------------------------------------


class QueryCache(WrappedEmbedder):
    """An Embedder that remembers its last single-text (query) vectors.

    Concurrent sources asking for the same task wait for one embedding (single flight)
    instead of each computing it; batches (texts to score) are never cached.
    """

    _SIZE = 64

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._vectors: SingleFlight[str, npt.NDArray[np.float32]] = SingleFlight(size=self._SIZE)

    def holds(self, text: str) -> bool:
        """Whether the vector of `text` is cached."""
        return self._vectors.holds(text)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if len(texts) != 1:
            return self.inner.embed(texts)
        return self._vectors.get(texts[0], lambda: self.inner.embed(texts))


@attrs.frozen(kw_only=True)
class Batch:
    """Texts a source scores together: rows of one corpus of a namespace (`slot`; None for
    texts without stored vectors, such as a rendered graph edge), their texts and, when they
    differ from analysing the text, their terms (a neuron is scored on its text and its
    trigger phrases; an indexed row on its indexed body)."""

    slot: Slot | None
    rowids: Sequence[int]
    texts: Sequence[str]
    terms: Sequence[Sequence[str]] | None = None


def score_rows(
    scorer: Scorer, conn: Reader, batch: Batch, vindex: VectorIndex | None = None
) -> list[Relevance]:
    """Relevance of a batch of texts on the one calibrated scale, in the scorer's mode.

    In dense modes each row's stored vector is used (its cosine from `vindex`'s matrix in
    memory); texts without one (or a batch without a slot) are embedded in one batch, as
    `Scorer.relevances_given` does.
    """
    texts = batch.texts
    terms = batch.terms if batch.terms is not None else [_analysis.terms(t) for t in texts]
    query = scorer.query_vector
    if scorer.mode not in DENSE_MODES or scorer.abstains or query is None or not texts:
        return scorer.relevances(terms, texts)
    cosines: list[float | None] = [None] * len(texts)
    if vindex is not None and batch.slot is not None:
        found = vindex.cosines(conn, batch.slot, list(batch.rowids), query)
        cosines = [found.get(r) for r in batch.rowids]
    return scorer.relevances_given(terms, texts, cosines)


def lexical_scores(scorer: Scorer, docs: Sequence[Sequence[str]]) -> list[float]:
    """The lexical base relevance of texts (their analysed terms): a cheap rank before the mode's."""
    matrix = _batch.lexical_matrix(scorer.profile, docs)
    probabilities = _batch.base_probabilities("lexical", scorer.profile, matrix, None, scorer.reference)
    return [float(p) for p in probabilities]


def type_allowed(types: Sequence[str] | None, memory_type: str) -> bool:
    """Whether rows of `memory_type` pass a typed filter (no filter: everything passes)."""
    return types is None or memory_type in types


def _first_id(item: tuple[Sequence[Any], Any]) -> object:
    """The id column of a (row, relevance) pair whose row is (rowid, id, ...)."""
    return item[0][1]


@attrs.frozen(kw_only=True)
class BestRows:
    """`best_first` over scored rows, building candidates only for the best `limit` rows.

    The rows are ordered as `best_first` orders candidates (score, then the entry id the row
    becomes); a damaged row among the best is skipped (and logged) and the next one taken.
    """

    entry_id: Callable[[Sequence[Any]], str]
    table: str
    limit: int
    floor: float = 0.0
    """Rows scoring under it are dropped before any candidate is built."""

    def candidates(
        self,
        scored: Iterable[tuple[Sequence[Any], Relevance]],
        build: Callable[[tuple[Sequence[Any], Relevance]], Candidate],
    ) -> list[Candidate]:
        """The best rows' candidates, best first, at most `limit`."""
        kept = sorted(
            ((row, rel) for row, rel in scored if rel.score > 0.0 and rel.score >= self.floor),
            key=lambda pair: (-pair[1].score, self.entry_id(pair[0])),
        )
        built = _validate.skip_damaged(kept, build, table=self.table, row_id=_first_id)
        return list(itertools.islice(built, max(self.limit, 0)))


def clearing(rowids: Iterable[int], rels: Iterable[Relevance], floor: float) -> dict[int, Relevance]:
    """The rowids (in their order) whose relevance has some evidence and is at least `floor`,
    with it: the rows worth reading."""
    return {r: rel for r, rel in zip(rowids, rels, strict=True) if rel.score > 0.0 and rel.score >= floor}


def best_first(candidates: Iterable[Candidate], limit: int, floor: float = 0.0) -> list[Candidate]:
    """Candidates with some evidence (score > 0) and at least `floor`, best first (ties by id),
    at most `limit`."""
    kept = [c for c in candidates if c.score > 0.0 and c.score >= floor]
    kept.sort(key=lambda c: (-c.score, c.entry_id))
    return kept[: max(limit, 0)]


def shared_or_searched(conn: Reader, ns_id: int, scorer: Scorer, *, corpus: int, depth: int) -> LexicalRun:
    """The task's best `depth` FTS matches of one corpus: the turn's shared retrieval (the
    scorer's reference, computed once for every source) when it went that deep, else a
    search of this corpus alone."""
    shared = scorer.reference.hits(corpus, depth)
    if shared is not None:
        return shared
    return LexicalRun.pack(
        conn.lexical_candidates(ns_id, sorted(scorer.profile.present), corpus=corpus, limit=depth)
    )


def recall_depth(limit: int) -> int:
    """How many index hits to score for a request of `limit` (the store uses the same)."""
    return max(4 * limit, 50)


# -- documents of the shared text index (facts, knowledge) ----------------------------------

_EMBED_BATCH = 64


@attrs.frozen
class DocTable:
    """A document table and the corpus its texts are indexed under (facts, knowledge)."""

    table: str
    corpus: int


def insert_docs(
    store: MemoryStore,
    namespace: Namespace,
    docs: DocTable,
    rows: Sequence[Mapping[str, Any]],
    *,
    replace: bool,
) -> None:
    """Insert validated rows (each with `id` and `text`) of a document table in one write.

    Each text is indexed in the namespace's FTS under `corpus` (statistics included), and
    with an embedder its vector is stored too, embedded before the write lock is taken.
    The table and the column names are fixed by the calling module, never user input.
    """
    table, corpus = docs.table, docs.corpus
    if not rows:  # no write, no namespace created
        return
    vectors = embedded(store, [str(r["text"]) for r in rows])
    with store.engine.write() as conn:
        ns_id = conn.ensure_namespace(namespace)
        ids = [str(row["id"]) for row in rows]
        old = conn.docs.find_many(table, ns_id, ids)
        if not replace:
            _validate.raise_if(_validate.exists_errors([i for i in ids if i in old], namespace))
        for rowid in old.values():
            conn.docs.delete(table, ns_id, rowid)
        rowids = conn.docs.insert_many(table, ns_id, rows)
        _index.add_docs(conn, ns_id, corpus, zip(rowids, (str(row["text"]) for row in rows), strict=True))
        if vectors is not None and store.embedder is not None:
            conn.store_vectors(Slot(ns_id, corpus), rowids, vectors, store.embedder.model_id)


def embedded(store: MemoryStore, texts: list[str]) -> npt.NDArray[np.float32] | None:
    """The texts' vectors in batches (before any write lock is taken); None without an embedder."""
    if store.embedder is None or not texts:
        return None
    embedder = store.embedder
    return np.concatenate(
        [embedder.embed(texts[i : i + _EMBED_BATCH]) for i in range(0, len(texts), _EMBED_BATCH)]
    )


def delete_doc_by_id(store: MemoryStore, namespace: Namespace, id_: str, *, table: str) -> bool:
    """Delete the document `id_` of a table in one write; return whether it existed."""
    with store.engine.write() as conn:
        ns_id = conn.namespace_id(namespace)
        rowid = None if ns_id is None else conn.docs.find(table, ns_id, id_)
        if ns_id is None or rowid is None:
            return False
        conn.docs.delete(table, ns_id, rowid)
    return True


@attrs.define(eq=False)
class CorpusSource(ReaderSource):
    """A source over one corpus of the shared text index: FTS search, then the one score.

    Subclasses fix the table, corpus, block, memory type and id prefix. A typed request gets
    candidates only if it asks for the source's memory type (an unclassified source, None,
    serves every request).
    """

    table: ClassVar[str] = ""
    gated: ClassVar[bool] = True
    corpus: ClassVar[int] = -1
    block: ClassVar[str] = "memory"
    memory_type: ClassVar[str | None] = None
    id_prefix: ClassVar[str] = ""
    extra_cols: ClassVar[tuple[str, ...]] = ()

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        if (
            request.types is not None
            and self.memory_type is not None
            and self.memory_type not in request.types
        ):
            return []
        ns_id = conn.namespace_id(request.namespace)
        if ns_id is None:
            return []
        prof = self._reader.store.profile_on(conn, ns_id, request.task)
        if not prof.present:  # no informative term of the task occurs in the namespace
            return []
        scorer = self._reader.scorer(conn, ns_id, request.task, request.mode)
        if self._gate_closed(scorer):  # no text of the corpus can reach the floor: none is read
            return []
        hits = shared_or_searched(conn, ns_id, scorer, corpus=self.corpus, depth=recall_depth(request.limit))
        best = BestRows(
            entry_id=lambda row: f"{self.id_prefix}{row[1]}",
            table=self.table,
            limit=request.limit,
            floor=self.min_score,
        )
        return best.candidates(self._scored(conn, ns_id, scorer, hits), lambda rs: self._candidate(*rs))

    def _scored(
        self, conn: Reader, ns_id: int, scorer: Scorer, hits: LexicalRun
    ) -> list[tuple[Sequence[Any], Relevance]]:
        """The hits' rows with their relevance. In lexical mode the hits are scored on their
        indexed terms first and only the rows that clear the floor are read (most never do);
        dense modes read every row, whose text a missing vector is embedded from."""
        cols = ("text", "created_at", "metadata", *self.extra_cols)
        if scorer.mode == "lexical" or scorer.abstains:
            kept = clearing(hits.rowids.tolist(), scorer.relevances_at(hits.terms), self.min_score)
            return [(row, kept[int(row[0])]) for row in conn.docs.rows(self.table, ns_id, list(kept), cols)]
        at = {rowid: i for i, rowid in enumerate(hits.rowids.tolist())}
        rows = conn.docs.rows(self.table, ns_id, list(at), cols)
        batch = Batch(
            slot=Slot(ns_id, self.corpus),
            rowids=[int(r[0]) for r in rows],
            texts=[r[2] for r in rows],
            terms=hits.terms.take([at[int(r[0])] for r in rows]),
        )
        return list(zip(rows, score_rows(scorer, conn, batch, self._reader.store.vindex), strict=True))

    def _candidate(self, row: Sequence[Any], rel: Relevance) -> Candidate:
        return Candidate(
            retrieval_key=(self.corpus, int(row[0])),
            entry_id=f"{self.id_prefix}{row[1]}",
            source=self.name,
            score=rel.score,
            qpp=rel.qpp,
            band=rel.band,
            text=row[2],
            block=self.block,
            memory_type=self.memory_type,
            created_at=row[3],
            metadata=self._metadata(row),
        )

    def _metadata(self, row: Sequence[Any]) -> dict[str, Any]:
        return {"id": row[1], "metadata": _validate.decode_metadata(row[4])}
