"""MemorySelector, the one memory-selection API.

Every source is asked under one deadline, fail-closed; one calibrated floor decides; nothing
relevant means true abstention.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import anyio
import attrs

from ._actor import DEFAULT_CONCURRENCY, DEFAULT_MAILBOX_SIZE, SourceActor
from ._breaker import DEFAULT_COOLDOWN, DEFAULT_MAX_COOLDOWN, DEFAULT_THRESHOLD, CircuitBreaker
from ._exceptions import BrokerClosedError, ConfigError, FieldError, ValidationError
from ._fields import count_errors, text_errors
from ._floor import Fate, fates, select, tally
from ._gather import gather
from ._model import (
    MEMORY_TYPES,
    Candidate,
    Namespace,
    SelectionResult,
    SessionContext,
    SourceOutcome,
    SourceStatus,
)
from ._queue import TurnQueue, default_max_turns
from .abc import RECALL_MODES, Source, SourceRequest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Sequence

DEFAULT_DEADLINE = 0.1
"""Seconds a turn waits for its sources."""

DEFAULT_MODE = "lexical"
"""The mode reported when neither the call nor the selector names one."""

DEFAULT_MAX_TURNS = default_max_turns()
"""Turns a selector serves at once by default (one per usable CPU, at least 2)."""

MIN_SOURCE_LIMIT = 10
"""Sources are asked for at least this many candidates, so the floor has room to choose."""


@attrs.define(eq=False)
class MemorySelector:
    """Selects the memories relevant to a task from every source. Get one from `open_selector`."""

    _actors: tuple[SourceActor, ...]
    _deadline: float
    _mode: str | None = None
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
        result, _ = await self._select(
            task_description,
            namespace=namespace,
            types=types,
            budget=budget,
            context=context,
            deadline=deadline,
            mode=mode,
        )
        return result

    async def explain_task(  # noqa: PLR0913 - select_for_task's keywords
        self,
        task_description: str,
        *,
        namespace: Namespace,
        types: Iterable[str] | None = None,
        budget: int = 10,
        context: SessionContext | None = None,
        deadline: float | None = None,
        mode: str | None = None,
    ) -> tuple[SelectionResult, tuple[Fate, ...]]:
        """`select_for_task`, and the fate of every candidate the sources returned (selected,
        below the floor, deduplicated, cut by the budget), as `context-broker explain` shows."""
        result, candidates = await self._select(
            task_description,
            namespace=namespace,
            types=types,
            budget=budget,
            context=context,
            deadline=deadline,
            mode=mode,
        )
        return result, fates(candidates, budget=budget)

    async def _select(  # noqa: PLR0913 - select_for_task's keywords
        self,
        task_description: str,
        *,
        namespace: Namespace,
        types: Iterable[str] | None,
        budget: int,
        context: SessionContext | None,
        deadline: float | None,
        mode: str | None,
    ) -> tuple[SelectionResult, tuple[Candidate, ...]]:
        if self._closed:
            raise BrokerClosedError("the memory selector is closed")
        checked_types = _check_call(
            task=task_description,
            namespace=namespace,
            types=types,
            budget=budget,
            deadline=deadline,
            mode=mode,
        )
        request = SourceRequest(
            task=task_description,
            namespace=namespace,
            types=checked_types,
            limit=max(budget, MIN_SOURCE_LIMIT),
            context=context,
            mode=mode or self._mode,
        )
        timeout = self._deadline if deadline is None else deadline
        until = anyio.current_time() + timeout
        async with self._queue.slot(until) as slot:
            if slot.admitted:
                candidates, outcomes = await gather(self._actors, request, deadline=until)
            else:
                candidates, outcomes = (), self._overloaded(slot.queued)
        memories, history = tally(candidates)
        result = SelectionResult(
            blocks=select(candidates, budget=budget),
            candidates_evaluated=memories.candidates + history.candidates,
            memories=memories,
            history=history,
            types_queried=checked_types,
            sources=outcomes,
            mode=request.mode or DEFAULT_MODE,
            qpp=max((c.qpp for c in candidates if c.qpp is not None), default=None),
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


def _check_call(  # noqa: PLR0913 - validates every argument of the API at once
    *,
    task: object,
    namespace: object,
    types: Iterable[str] | None,
    budget: object,
    deadline: object,
    mode: object,
) -> tuple[str, ...] | None:
    """Check every argument; raise one ValidationError listing every problem."""
    # The same rules as the store's recall, so every source receives only input it accepts.
    errors = text_errors("task", task) + count_errors("budget", budget)
    if not isinstance(namespace, Namespace):
        errors.append(FieldError(field="namespace", code="type", message="must be a Namespace"))
    if deadline is not None and not _positive(deadline):
        errors.append(FieldError(field="deadline", code="range", message="must be seconds > 0"))
    if mode is not None and mode not in RECALL_MODES:
        errors.append(
            FieldError(field="mode", code="unknown", message=f"must be one of {', '.join(RECALL_MODES)}")
        )
    checked, type_errors = _check_types(types)
    errors.extend(type_errors)
    if errors:
        raise ValidationError(errors)
    return checked


def _check_types(types: Iterable[str] | None) -> tuple[tuple[str, ...] | None, list[FieldError]]:
    if types is None:
        return None, []
    if isinstance(types, str):
        return None, [FieldError(field="types", code="type", message="must be a list of type names")]
    checked = tuple(dict.fromkeys(types))
    if not checked:
        return None, [FieldError(field="types", code="empty", message="must name at least one type")]
    unknown = [t for t in checked if t not in MEMORY_TYPES]
    if unknown:
        message = f"unknown {', '.join(map(repr, unknown))}; known: {', '.join(MEMORY_TYPES)}"
        return None, [FieldError(field="types", code="unknown", message=message)]
    return checked, []


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


def _check_config(  # noqa: PLR0913 - one check per option of open_selector
    *,
    sources: Sequence[object],
    deadline: float,
    mailbox_size: int,
    concurrency: int,
    breaker_threshold: int,
    breaker_cooldown: float,
    breaker_max_cooldown: float,
    mode: str | None,
    max_turns: int | None,
) -> None:
    problems = [f"{s!r} is not a broker.abc.Source" for s in sources if not isinstance(s, Source)]
    names = [s.name for s in sources if isinstance(s, Source)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(f"duplicate source names: {', '.join(duplicates)}")
    if not _positive(deadline):
        problems.append("deadline must be seconds > 0")
    for label, value in (
        ("mailbox_size", mailbox_size),
        ("concurrency", concurrency),
        ("breaker_threshold", breaker_threshold),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{label} must be an integer >= 1")
    if not _positive(breaker_cooldown) and breaker_cooldown != 0:
        problems.append("breaker_cooldown must be seconds >= 0")
    if not _positive(breaker_max_cooldown):
        problems.append("breaker_max_cooldown must be seconds > 0")
    if mode is not None and mode not in RECALL_MODES:
        problems.append(f"mode must be one of {', '.join(RECALL_MODES)}")
    if max_turns is not None and (
        isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1
    ):
        problems.append("max_turns must be an integer >= 1 or None")
    if problems:
        raise ConfigError("; ".join(problems))


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

    Every source is opened before any turn's deadline runs. On exit every actor stops, every
    task ends and every source is closed.

    A source whose `open()` raises is reported `failed` on every turn; it does not stop the
    others. A source that fails `breaker_threshold` turns in a row (errors, or late while
    every other source was in time) is skipped for `breaker_cooldown` seconds, then probed;
    each failed probe doubles the cooldown, up to `breaker_max_cooldown` (or the first
    cooldown, if longer).

    At most `max_turns` turns are served at once (default: one per usable CPU, at least 2;
    None: no limit); more wait in line, first come first served, inside their own
    deadline (`broker._queue`). Raises ConfigError on bad options.
    """
    sources = tuple(sources)
    _check_config(
        sources=sources,
        deadline=deadline,
        mailbox_size=mailbox_size,
        concurrency=concurrency,
        breaker_threshold=breaker_threshold,
        breaker_cooldown=breaker_cooldown,
        breaker_max_cooldown=breaker_max_cooldown,
        mode=mode,
        max_turns=max_turns,
    )
    actors = tuple(
        SourceActor(
            source,
            mailbox_size=mailbox_size,
            concurrency=concurrency,
            breaker=CircuitBreaker(
                threshold=breaker_threshold,
                cooldown=breaker_cooldown,
                max_cooldown=max(breaker_max_cooldown, breaker_cooldown),
            ),
        )
        for source in sources
    )
    # The body's own exception is carried out of the task group by hand so that callers get
    # it as raised, not wrapped in an ExceptionGroup by the task group.
    body_error: BaseException | None = None
    async with anyio.create_task_group() as tg:
        selector = MemorySelector(actors, deadline, mode, TurnQueue(max_turns))
        try:
            for actor in actors:
                await tg.start(actor.run)
            yield selector
        except GeneratorExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - re-raised below, outside the task group
            body_error = exc
        finally:
            selector._close()  # noqa: SLF001 - the context manager owns its selector
            tg.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
