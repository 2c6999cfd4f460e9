"""Plumbing shared by the memory sources: interruptible reads, the one score, the lifecycle.

Reads run on a snapshot of the store's engine (`sources.storage._engine.Engine.read`) in a worker
thread that a deadline can stop: the read's `ReadStop` is tripped at cancellation, and the
engine stops the running statement and every later one of that read (SQLite: see
`sources.storage._sqlite._engine`). Every text is scored by the one calibrated `Scorer`; sources
share one open/fetch/aclose.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import attrs

from broker import RECALL_MIN_SCORE, BrokerClosedError, Candidate, SourceAnswer
from broker.log import get_logger

from . import _results
from ._scoring import (
    Batch,
    BestRows,
    clearing,
    recall_depth,
    score_rows,
    shared_or_searched,
)
from ._store_reader import Gate, StoreReader, ping
from .relevance._relevance import DENSE_MODES
from .relevance._scorer import Relevance, Scorer
from .storage import _validate
from .storage._engine import Slot
from .storage._runs import LexicalRun

if TYPE_CHECKING:
    from collections.abc import Sequence

    from broker.abc import SourceRequest

    from .storage._engine import Reader


T = TypeVar("T")

logger = get_logger(__name__)


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
    turn found the gate closed it answers nothing without a read of its own (unless
    `_reads_closed` says it also scores on evidence of its own: the graph source)."""
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
    more (a source that also scores on evidence of its own, `_reads_closed`, goes on). Lower it
    only to see below-floor candidates (`explain` passes 0)."""
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
        await self._reader.run(ping)
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
        gate, found = await self._reader.gated(request, read, self._reads_at)
        if gate is None:  # the gate's read failed: this source reads on its own
            return found if found is not None else await self._reader.run(read)
        if found is None:
            found = await self._reader.run(read) if self._reads_at(gate) else []
        # The turn's shared retrieval, as every gated source of the turn reports it (one set):
        # counted in the trace, below the floor included, at no read of its own; and the gate
        # it read, which the turn reports also when it kept every memory out.
        answer = SourceAnswer(candidates=tuple(found), considered=gate.considered, qpp=gate.qpp)
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

    def _reads_at(self, gate: Gate) -> bool:
        """Whether this gated source reads once the task's gate is known: when the gate reaches
        its floor, or past it when it also scores on evidence of its own (`_reads_closed`)."""
        return gate.qpp >= self.min_score or self._reads_closed(gate)

    def _reads_closed(self, gate: Gate) -> bool:  # noqa: ARG002 - the hook's signature
        """Whether this gated source reads when the task's gate is under its floor: never,
        unless it also scores candidates on evidence of their own (`GraphSource`)."""
        return False

    def _gate_closed(self, scorer: Scorer) -> bool:
        """Whether no text can reach this source's floor for the scorer's task: every score
        is 0 (`Scorer.abstains`), or the task's gate is under the floor."""
        return scorer.abstains or scorer.qpp < self.min_score

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerClosedError(f"source {self.name!r} is closed")


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
