"""MemorySelector, the one memory-selection API.

Every source is asked under one deadline, fail-closed; one calibrated floor decides; nothing
relevant means true abstention.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import attrs

from ._actor import DEFAULT_CONCURRENCY, DEFAULT_MAILBOX_SIZE, SourceActor
from ._breaker import DEFAULT_COOLDOWN, DEFAULT_MAX_COOLDOWN, DEFAULT_THRESHOLD, CircuitBreaker
from ._exceptions import BrokerClosedError, ConfigError, ValidationError
from ._fields import MODE, POSITIVE, RECALL_MODES, SECONDS, seconds
from ._floor import Fate, fates, select, tally
from ._gather import gather
from ._model import (
    DEFAULT_MODE,
    Candidate,
    Namespace,
    SelectionResult,
    SessionContext,
    SourceOutcome,
    SourceStatus,
    TurnRequest,
)
from ._queue import TurnQueue, default_max_turns
from .abc import ModalSource, Source, SourceRequest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Hashable, Iterable, Sequence

DEFAULT_DEADLINE = 0.1
"""Seconds a turn waits for its sources."""

DEFAULT_MAX_TURNS = default_max_turns()
"""Turns a selector serves at once by default (one per usable CPU, at least 2)."""

MIN_SOURCE_LIMIT = 10
"""Sources are asked for at least this many candidates, so the floor has room to choose."""


@attrs.define(eq=False)
class MemorySelector:
    """Selects the memories relevant to a task from every source. Get one from `open_selector`."""

    _actors: tuple[SourceActor, ...]
    _deadline: float
    _mode: str = DEFAULT_MODE
    _queue: TurnQueue = attrs.field(factory=lambda: TurnQueue(None))
    _closed: bool = attrs.field(default=False, init=False)

    @property
    def source_names(self) -> tuple[str, ...]:
        """The sources, in the order they are asked and reported."""
        return tuple(a.name for a in self._actors)

    @property
    def closed(self) -> bool:
        """True after `open_selector` exited."""
        return self._closed

    @property
    def deadline(self) -> float:
        """Seconds a turn takes at most when its call names no deadline."""
        return self._deadline

    @property
    def mode(self) -> str:
        """The recall mode of a turn that names none, resolved when the selector opened: the
        `mode=` of `open_selector`, else the sources' own (`broker.abc.ModalSource`), else
        lexical. Sources are asked in it and the trace reports it."""
        return self._mode

    async def select_for_task(  # noqa: PLR0913 - the one API, keyword-only
        self,
        task_description: str,
        *,
        namespace: Namespace,
        types: Iterable[str] | None = None,
        budget: int = 10,
        context: SessionContext | None = None,
        deadline: float | None = None,
        mode: str | None = None,
    ) -> SelectionResult:
        """Select at most `budget` memories for the task, best first; may select none.

        `deadline` (seconds, default the selector's) bounds the whole turn, the wait for a
        place included when more turns are in flight than the selector serves at once
        (`open_selector(max_turns=...)`; `result.queued_ms`): a turn that could not be served
        in time answers with every source `overloaded`. Raises ValidationError on bad input
        and BrokerClosedError after close; a source problem never raises, it shows as that
        source's status in `result.sources`.
        """
        errors = SECONDS.optional().errors("deadline", deadline)
        timeout = self._deadline if deadline is None or errors else deadline
        try:
            request = TurnRequest(
                task=task_description,
                namespace=namespace,
                deadline=anyio.current_time() + timeout,
                mode=self._mode if mode is None else mode,
                types=types,  # TurnRequest makes it a tuple
                budget=budget,
                context=context,
            )
        except ValidationError as exc:
            errors = [*exc.errors, *errors]
        if errors:
            raise ValidationError(errors)
        return await self.select(request)

    async def select(self, request: TurnRequest) -> SelectionResult:
        """Select for a built request (the broker's, or a host's: `TurnRequest` with
        `deadline=anyio.current_time() + selector.deadline` and `mode=selector.mode` for the
        defaults); see `select_for_task`."""
        result, _ = await self._select(request)
        return result

    async def explain(self, request: TurnRequest) -> tuple[SelectionResult, tuple[Fate, ...]]:
        """`select`, and the fate of every candidate the sources returned (selected, below the
        floor, deduplicated, cut by the budget), as `context-broker explain` shows."""
        result, candidates = await self._select(request)
        return result, fates(candidates, budget=request.budget)

    async def _select(self, request: TurnRequest) -> tuple[SelectionResult, tuple[Candidate, ...]]:
        if self._closed:
            raise BrokerClosedError("the memory selector is closed")
        asked = SourceRequest(
            task=request.task,
            namespace=request.namespace,
            types=request.types,
            limit=max(request.budget, MIN_SOURCE_LIMIT),
            context=request.context,
            mode=request.mode,
        )
        async with self._queue.slot(request.deadline) as slot:
            if slot.admitted:
                candidates, outcomes = await gather(self._actors, asked, deadline=request.deadline)
            else:
                candidates, outcomes = (), self._overloaded(slot.queued)
        memories, history = tally(candidates, considered=_considered(outcomes))
        result = SelectionResult(
            blocks=select(candidates, budget=request.budget),
            candidates_evaluated=memories.candidates + history.candidates,
            memories=memories,
            history=history,
            types_queried=request.types,
            sources=outcomes,
            mode=request.mode,
            qpp=_gate(candidates, outcomes),
            queued_ms=1000 * slot.queued,
        )
        return result, candidates

    def _overloaded(self, queued: float) -> tuple[SourceOutcome, ...]:
        """Every source's outcome in a turn that waited in line too long to be served."""
        return tuple(
            SourceOutcome(name=a.name, status=SourceStatus.OVERLOADED, latency_ms=1000 * queued)
            for a in self._actors
        )

    def _close(self) -> None:
        self._closed = True
        for actor in self._actors:
            actor.stop()


def _gate(candidates: Sequence[Candidate], outcomes: Sequence[SourceOutcome]) -> float | None:
    """The task's gate as the sources reported it: on their candidates, and on the answers of
    those that returned none because it kept every memory out (None: no source reported one)."""
    read = [c.qpp for c in candidates if c.qpp is not None] + [o.qpp for o in outcomes if o.qpp is not None]
    return max(read, default=None)


def _considered(outcomes: Sequence[SourceOutcome]) -> frozenset[Hashable]:
    """The keys of the memories the sources considered, once each. Sources sharing one
    retrieval report one set between them (the same object): it is taken once."""
    sets = {id(o.considered): o.considered for o in outcomes if o.considered}
    if len(sets) <= 1:
        return next(iter(sets.values()), frozenset())
    return frozenset().union(*sets.values())


@attrs.frozen(kw_only=True)
class _Options:
    """`open_selector`'s options, checked together."""

    deadline: float
    mailbox_size: int
    concurrency: int
    breaker_threshold: int
    breaker_cooldown: float
    breaker_max_cooldown: float
    mode: str | None
    max_turns: int | None

    def check(self, sources: Sequence[object]) -> None:
        """Raise one ConfigError listing every problem of the options and the sources."""
        problems = [f"{s!r} is not a broker.abc.Source" for s in sources if not isinstance(s, Source)]
        names = [s.name for s in sources if isinstance(s, Source)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            problems.append(f"duplicate source names: {', '.join(duplicates)}")
        problems += [
            *SECONDS.problem("deadline", self.deadline),
            *POSITIVE.problem("mailbox_size", self.mailbox_size),
            *POSITIVE.problem("concurrency", self.concurrency),
            *POSITIVE.problem("breaker_threshold", self.breaker_threshold),
            *seconds(zero=True).problem("breaker_cooldown", self.breaker_cooldown),
            *SECONDS.problem("breaker_max_cooldown", self.breaker_max_cooldown),
            *MODE.optional().problem("mode", self.mode),
            *POSITIVE.optional().problem("max_turns", self.max_turns),
        ]
        if problems:
            raise ConfigError("; ".join(problems))

    def actor(self, source: Source) -> SourceActor:
        """The actor that runs `source` under these options."""
        return SourceActor(
            source,
            mailbox_size=self.mailbox_size,
            concurrency=self.concurrency,
            breaker=CircuitBreaker(
                threshold=self.breaker_threshold,
                cooldown=self.breaker_cooldown,
                max_cooldown=max(self.breaker_max_cooldown, self.breaker_cooldown),
            ),
        )


def resolve_mode(sources: Sequence[Source], mode: str | None) -> str:
    """The selector's recall mode: `mode`, else the first the sources name as their own
    (`ModalSource.default_mode`), else `DEFAULT_MODE`."""
    if mode is not None:
        return mode
    named = (s.default_mode for s in sources if isinstance(s, ModalSource))
    return next((m for m in named if m in RECALL_MODES), DEFAULT_MODE)


@contextlib.asynccontextmanager
async def open_selector(  # noqa: PLR0913 - keyword-only options with defaults
    sources: Sequence[Source],
    *,
    deadline: float = DEFAULT_DEADLINE,
    mailbox_size: int = DEFAULT_MAILBOX_SIZE,
    concurrency: int = DEFAULT_CONCURRENCY,
    breaker_threshold: int = DEFAULT_THRESHOLD,
    breaker_cooldown: float = DEFAULT_COOLDOWN,
    breaker_max_cooldown: float = DEFAULT_MAX_COOLDOWN,
    mode: str | None = None,
    max_turns: int | None = DEFAULT_MAX_TURNS,
) -> AsyncIterator[MemorySelector]:
    """Open every source, run one actor per source, and yield the selector.

    Every source is opened before any turn's deadline runs; on exit every actor stops, every
    task ends and every source is closed. `deadline` and `mode` are those of a turn that
    names none (`mode` None: the sources' own, `MemorySelector.mode`). A source whose
    `open()` raises is `failed` on every turn, without stopping the others. A source failing
    `breaker_threshold` turns in a row (errors, or late while the others were in time) is
    skipped for `breaker_cooldown` seconds, then probed; each failed probe doubles the
    cooldown, up to `breaker_max_cooldown` (or the first cooldown, if longer). At most
    `max_turns` turns run at once (None: no limit), more wait in line inside their own
    deadline (`broker._queue`). Raises ConfigError on bad options.
    """
    sources = tuple(sources)
    options = _Options(
        deadline=deadline,
        mailbox_size=mailbox_size,
        concurrency=concurrency,
        breaker_threshold=breaker_threshold,
        breaker_cooldown=breaker_cooldown,
        breaker_max_cooldown=breaker_max_cooldown,
        mode=mode,
        max_turns=max_turns,
    )
    options.check(sources)
    actors = tuple(options.actor(source) for source in sources)
    selector = MemorySelector(actors, deadline, resolve_mode(sources, mode), TurnQueue(max_turns))
    async with _running(selector, actors):
        yield selector


@contextlib.asynccontextmanager
async def _running(selector: MemorySelector, actors: Sequence[SourceActor]) -> AsyncIterator[None]:
    """Start every actor, then run the body; on exit close the selector and stop them all."""
    # The body's own exception is carried out of the task group by hand so that callers get
    # it as raised, not wrapped in an ExceptionGroup by the task group.
    body_error: BaseException | None = None
    async with anyio.create_task_group() as tg:
        try:
            for actor in actors:
                await tg.start(actor.run)
            yield
        except GeneratorExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - re-raised below, outside the task group
            body_error = exc
        finally:
            selector._close()  # noqa: SLF001 - the context manager owns its selector
            tg.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
