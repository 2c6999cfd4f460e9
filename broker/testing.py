"""Public fakes and checks for tests of code that uses the broker.

Sources that answer, are slow, hang, raise, cancel themselves or block the event loop, and
record how they were opened, asked and closed:

    from broker.testing import FakeSource, HangingSource, make_candidate

    async with open_selector([FakeSource("a", candidates=[make_candidate("m1")]), HangingSource("b")]) as s:
        result = await s.select_for_task("...", namespace=Namespace(tenant_id="t"))

A source must never block the event loop: every source of a turn shares it, so a fetch that
calls `time.sleep` or runs a slow query without a worker thread makes the healthy sources of
the same turn miss the deadline and report `timeout`. `check_source_never_blocks` catches
such a source in your tests (real clock only):

    stall = await check_source_never_blocks(MySource(...), request)  # AssertionError if it blocks
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import time
from importlib import resources
from typing import TYPE_CHECKING, TypedDict, Unpack

import anyio
import attrs
import trio

from ._candidates import SourceAnswer
from ._model import Candidate

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Hashable, Sequence

    from anyio.abc import TaskStatus

    from ._model import SelectionResult, TurnRequest
    from .abc import Selector, Source, SourceRequest

DEFAULT_STALL_LIMIT = 0.025
"""Seconds a source may hold the event loop in one stretch before `check_source_never_blocks` fails."""


class CandidateOptions(TypedDict, total=False):
    """`make_candidate`'s options: a candidate's other fields."""

    source: str
    text: str | None
    block: str
    memory_type: str | None
    created_at: str | None
    retrieval_key: Hashable | None


def make_candidate(entry_id: str, score: float = 0.9, **options: Unpack[CandidateOptions]) -> Candidate:
    """Build a candidate with sensible defaults (source "fake", block "memory"); `text`
    defaults to a phrase naming the entry id. TypeError for an unknown option."""
    unknown = sorted(set(options) - set(CandidateOptions.__annotations__))
    if unknown:
        msg = f"make_candidate() got unexpected keyword arguments: {', '.join(unknown)}"
        raise TypeError(msg)
    text = options.get("text")
    return Candidate(
        entry_id=entry_id,
        source=options.get("source", "fake"),
        score=score,
        text=f"memory {entry_id}" if text is None else text,
        block=options.get("block", "memory"),
        memory_type=options.get("memory_type"),
        created_at=options.get("created_at"),
        retrieval_key=options.get("retrieval_key"),
    )


@attrs.define(eq=False)
class FakeSource:
    """Answers every request with `candidates` after `delay` seconds (of the event loop's clock);
    given `considered` or `qpp`, as a `SourceAnswer` saying it considered those memories too
    and read that gate.

    Records what happened: `opened` and `closed` counts, `requests` received, and `active`,
    the fetches in progress right now.
    """

    name: str
    candidates: Sequence[Candidate] = attrs.field(default=(), converter=tuple)
    delay: float = 0.0
    considered: frozenset[Hashable] | None = None
    qpp: float | None = None
    opened: int = attrs.field(default=0, init=False)
    closed: int = attrs.field(default=0, init=False)
    active: int = attrs.field(default=0, init=False)
    requests: list[SourceRequest] = attrs.field(factory=list, init=False)

    @property
    def is_open(self) -> bool:
        """Opened and not yet closed."""
        return self.opened > self.closed

    @property
    def calls(self) -> int:
        """How many fetches were started."""
        return len(self.requests)

    async def open(self) -> None:
        """Record the open."""
        self.opened += 1

    async def aclose(self) -> None:
        """Record the close."""
        self.closed += 1

    async def fetch(self, request: SourceRequest) -> Sequence[Candidate]:
        """Record the request, wait `delay`, then answer."""
        self.requests.append(request)
        self.active += 1
        try:
            if self.delay > 0:
                await anyio.sleep(self.delay)
            return await self._answer(request)
        finally:
            self.active -= 1

    async def _answer(self, request: SourceRequest) -> Sequence[Candidate]:  # noqa: ARG002 - hook
        if self.considered is not None or self.qpp is not None:
            considered = self.considered or frozenset()
            return SourceAnswer(candidates=self.candidates, considered=considered, qpp=self.qpp)
        return self.candidates


@attrs.define(eq=False)
class SlowSource(FakeSource):
    """Answers, but only after `delay` seconds (default 1 s: later than a default turn)."""

    delay: float = 1.0


@attrs.define(eq=False)
class HangingSource(FakeSource):
    """Never answers: it sleeps until its work is cancelled."""

    async def _answer(self, request: SourceRequest) -> Sequence[Candidate]:  # noqa: ARG002
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover


def _default_error() -> Exception:
    return RuntimeError("FailingSource failed on purpose")


@attrs.define(eq=False)
class FailingSource(FakeSource):
    """Raises `error` (after `delay`) while `failing` is true; answers normally once it is false."""

    error: Exception = attrs.field(factory=_default_error)
    failing: bool = True

    async def _answer(self, request: SourceRequest) -> Sequence[Candidate]:
        if self.failing:
            raise self.error
        return await super()._answer(request)


@attrs.define(eq=False)
class SelfCancellingSource(FakeSource):
    """Cancels a scope of its own around its work and so returns nothing.

    With `leak=True` it instead raises the event loop's cancellation exception out of fetch
    without being cancelled (a buggy source); the selector must report it as failed.
    """

    leak: bool = False

    async def _answer(self, request: SourceRequest) -> Sequence[Candidate]:
        if self.leak:
            raise _cancellation()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await anyio.sleep_forever()
            return await super()._answer(request)  # pragma: no cover
        return ()


@attrs.define(eq=False)
class BlockingSource(FakeSource):
    """A buggy source: its fetch holds the event loop for `block` seconds (`time.sleep`), then answers.

    Every other source of the turn is stalled with it; use it to see that your checks catch one.
    """

    block: float = 0.2

    async def _answer(self, request: SourceRequest) -> Sequence[Candidate]:
        time.sleep(self.block)  # noqa: ASYNC251 - blocking the loop is this fake's whole point
        return await super()._answer(request)


@attrs.define(eq=False)
class RecordingSelector:
    """A selector as a broker sees it (`open_broker(selector=RecordingSelector(selector))`),
    passing every turn through and recording its request and its result (or exception)."""

    inner: Selector
    requests: list[TurnRequest] = attrs.field(factory=list)
    results: list[SelectionResult | Exception] = attrs.field(factory=list)

    @property
    def deadline(self) -> float:
        """The inner selector's."""
        return self.inner.deadline

    @property
    def mode(self) -> str:
        """The inner selector's."""
        return self.inner.mode

    async def select(self, request: TurnRequest) -> SelectionResult:
        """Select with the inner selector, recording the request and what came of it."""
        self.requests.append(request)
        try:
            result = await self.inner.select(request)
        except Exception as exc:
            self.results.append(exc)
            raise
        self.results.append(result)
        return result


async def longest_loop_stall(work: Callable[[], Awaitable[object]], *, tick: float = 0.001) -> float:
    """Await `work()` while a ticker watches the event loop; return its longest stall in seconds.

    The ticker sleeps `tick` seconds at a time; a stall is how much later than that it woke,
    i.e. how long something held the loop without yielding. It wakes once more after `work`
    returns, so a fetch that blocks and never awaits is caught too. Real clock
    (`time.perf_counter`) only: under a virtual clock such as trio's autojump clock every
    stall reads as zero.
    """
    done = False
    worst = 0.0

    async def ticker(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        nonlocal worst
        last = time.perf_counter()
        task_status.started()
        while True:
            await anyio.sleep(tick)
            now = time.perf_counter()
            worst = max(worst, now - last - tick)
            last = now
            if done:
                return

    async with anyio.create_task_group() as tg:
        await tg.start(ticker)
        try:
            await work()
        finally:
            done = True
    return worst


async def check_source_never_blocks(
    source: Source, request: SourceRequest, *, limit: float = DEFAULT_STALL_LIMIT, runs: int = 5
) -> float:
    """Open `source`, fetch `runs` times, close it; raise AssertionError if it holds the loop.

    Returns the median of the runs' longest stalls (seconds), and fails when that median
    passes `limit`: a source that blocks does so run after run, while a loaded machine
    stalls a run now and then. Opening is not watched: it runs before any turn's deadline.
    Real clock only (see `longest_loop_stall`).
    """
    await source.open()
    try:
        stalls = [await longest_loop_stall(functools.partial(source.fetch, request)) for _ in range(runs)]
    finally:
        await source.aclose()
    median = statistics.median(stalls)
    if median > limit:
        msg = (
            f"source {source.name!r} held the event loop for {median * 1000:.1f} ms in one stretch "
            f"(median of {runs} fetches; limit {limit * 1000:.0f} ms): run blocking work in a worker thread"
        )
        raise AssertionError(msg)
    return median


def _cancellation() -> BaseException:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return trio.Cancelled._create()  # noqa: SLF001 - trio has no public constructor
    return asyncio.CancelledError()


__all__ = [
    "DEFAULT_STALL_LIMIT",
    "BlockingSource",
    "FailingSource",
    "FakeSource",
    "HangingSource",
    "RecordingSelector",
    "SelfCancellingSource",
    "SlowSource",
    "check_source_never_blocks",
    "longest_loop_stall",
    "make_candidate",
]


def background_memories() -> tuple[str, ...]:
    """Varied memory texts (58 notes of a fictional team) to write into a small test store.

    Relevance is calibrated on per-namespace term statistics: in a store holding only a
    test's three memories on one topic every term is common and nothing looks specific.
    Writing these first gives the store the varied topics a real one has. They are this
    module's own fixture (`broker/data/background_memories.txt`, one text a line): the same
    texts as the notes of the application's demo sample, which the library never reads.
    """
    raw = resources.files("broker").joinpath("data", "background_memories.txt").read_text(encoding="utf-8")
    return tuple(line for line in raw.split("\n") if line.strip())
