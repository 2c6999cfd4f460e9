"""The fault matrix: faulty sources beside healthy ones, turn after turn, on a virtual clock.

Hypothesis draws, for each scenario, a few faulty sources and for each of their calls a fault
at a point of the turn: raise (a plain error, SQLITE_BUSY, SQLITE_FULL, a corrupt page, a
translated StoreError), hang, run slow, ignore cancellation past the deadline, cancel itself,
leak a cancellation, answer with the wrong type, with a malformed candidate (`text=None`) or a
huge text, fail to open or to close. Every turn is a real `assemble` through the broker and the
selector, under trio's autojump clock. Whatever the faults:

- no turn fails: `assemble` returns and its memory selection ran (no swallowed exception);
- every turn completes within its deadline, exactly, in virtual time;
- the healthy sources' outcomes and selected memories are those of a fault-free run;
- a healthy source is never skipped (its circuit breaker never opens);
- no candidate text past MAX_TEXT_CHARS reaches the selection (the gather boundary cuts it).

A CI run injects at least MIN_FAULTS faults (`--slow` runs ten times as many scenarios).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import anyio
import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker import MAX_TEXT_CHARS, Candidate, Namespace, SelectionResult, Turn, open_broker
from broker._selector import open_selector
from broker.abc import SourceRequest, TaskRecord
from broker.testing import FakeSource, RecordingSelector, make_candidate
from sources import StoreError

NS = Namespace(tenant_id="acme", project_id="matrix")
TASK = TaskRecord(
    task_id="t1",
    description="which database did we pick for the billing service",
    status="active",
    created_at="2026-01-01T00:00:00+00:00",
    updated_at="2026-01-01T00:00:00+00:00",
)
DEADLINE = 0.1
MIN_FAULTS = 10_000
CI_SCENARIOS = 300

# Where in the turn a fault strikes, as a fraction of the deadline: before the first await,
# early, mid-turn, just before, exactly at, and after the deadline.
POINTS = (None, 0.01, 0.5, 0.99, 1.0, 1.5)

RAISES: dict[str, BaseException] = {
    "error": RuntimeError("boom"),
    "sqlite-busy": sqlite3.OperationalError("database is locked"),
    "sqlite-full": sqlite3.OperationalError("database or disk is full"),
    "sqlite-corrupt": sqlite3.DatabaseError("database disk image is malformed"),
    "store-error": StoreError("memory.db: database disk image is malformed"),
}
TIMING = ("hang", "slow", "deaf", "self-cancel", "leak-cancel")
ANSWERS = ("wrong-type", "malformed", "huge-text")
KINDS = (*RAISES, *TIMING, *ANSWERS)
"""Faults every CI run injects."""


def _healthy() -> list[FakeSource]:
    return [
        FakeSource(
            f"healthy{i}",
            candidates=[make_candidate(f"h{i}-{j}", 0.5 + 0.1 * j, source=f"healthy{i}") for j in range(3)],
        )
        for i in range(3)
    ]


@attrs.frozen
class Fault:
    """One call's behaviour: `kind` ("ok" answers normally) striking at `point` x deadline."""

    kind: str
    point: float | None


def _malformed(source: str) -> Candidate:
    bad = make_candidate(f"{source}-bad", 0.8, source=source)
    object.__setattr__(bad, "text", None)  # frozen attrs: forge what a buggy source could build
    return bad


@attrs.define(eq=False)
class ScriptedSource:
    """A source whose n-th call does what its n-th Fault says; it may also fail to open or close."""

    name: str
    script: Sequence[Fault]
    open_fails: bool = False
    close_fails: bool = False
    delivered: list[str] = attrs.field(factory=list)

    async def open(self) -> None:
        """Fail here if told to."""
        if self.open_fails:
            self.delivered.append("open-error")
            raise OSError("cannot open")

    async def aclose(self) -> None:
        """Fail here if told to."""
        if self.close_fails:
            self.delivered.append("close-error")
            raise OSError("cannot close")

    async def fetch(self, request: SourceRequest) -> Sequence[Candidate]:  # noqa: ARG002
        """Do what the script says for this call."""
        fault = self.script[len(self.delivered) % len(self.script)]
        self.delivered.append(fault.kind)
        if fault.point is not None:
            await self._until(fault)
        return await self._act(fault)

    async def _until(self, fault: Fault) -> None:
        assert fault.point is not None
        if fault.kind == "deaf":  # deaf to cancellation: the deadline cannot stop it
            with anyio.CancelScope(shield=True):
                await anyio.sleep(fault.point * DEADLINE + DEADLINE)
        else:
            await anyio.sleep(fault.point * DEADLINE)

    async def _act(self, fault: Fault) -> Sequence[Candidate]:
        if fault.kind in RAISES:
            raise RAISES[fault.kind]
        if fault.kind == "hang":
            await anyio.sleep_forever()
        if fault.kind == "self-cancel":
            with anyio.CancelScope() as scope:
                scope.cancel()
                await anyio.sleep_forever()
            return ()
        if fault.kind == "leak-cancel":
            raise trio.Cancelled._create()
        if fault.kind == "wrong-type":
            return "not a list of candidates"  # type: ignore[return-value]
        if fault.kind == "malformed":
            return [_malformed(self.name)]
        text = "x" * 200_000 if fault.kind == "huge-text" else f"{self.name} says hello"
        return [make_candidate(f"{self.name}-{len(self.delivered)}", 0.8, source=self.name, text=text)]


@attrs.define(eq=False)
class Tasks:
    """One active task, no history: everything but the sources is instant and certain."""

    async def get_task(self, task_id: str, *, namespace: Namespace) -> TaskRecord | None:  # noqa: ARG002
        """The one task, always active."""
        return TASK

    async def completed_tasks(self, *, namespace: Namespace, limit: int) -> Sequence[TaskRecord]:  # noqa: ARG002
        """No history."""
        return ()

    async def turns(self, task_id: str, *, namespace: Namespace) -> Sequence[Any]:  # noqa: ARG002
        """No conversation."""
        return ()


@attrs.frozen
class Scenario:
    """Faulty sources beside the healthy ones, and the pause (virtual seconds) after each turn:
    pauses let tripped breakers half-open, so faulty sources keep being probed."""

    faulty: tuple[ScriptedSource, ...]
    pauses: tuple[float, ...]


def _scenarios(kinds: Sequence[str]) -> st.SearchStrategy[Scenario]:
    """4-8 faulty sources, each with a script of faults (about 9 calls in 10 faulty), 6-12
    turns; one source in 20 fails to open, one in 2 fails to close."""
    fault = st.builds(
        Fault, kind=st.sampled_from(("ok", *kinds, *kinds, *kinds)), point=st.sampled_from(POINTS)
    )
    source = st.builds(
        lambda i, script, open_fails, close_fails: ScriptedSource(
            f"faulty{i}", script, open_fails=open_fails, close_fails=close_fails
        ),
        st.integers(0, 7),
        st.lists(fault, min_size=1, max_size=8).map(tuple),
        st.integers(0, 19).map(lambda n: n == 0),
        st.booleans(),
    )
    return st.builds(
        Scenario,
        faulty=st.lists(source, min_size=4, max_size=8, unique_by=lambda s: s.name).map(tuple),
        pauses=st.lists(st.sampled_from((0.0, 1.0, 2.0, 4.0, 30.0)), min_size=6, max_size=12).map(tuple),
    )


def _turn() -> Turn:
    return Turn(task_id="t1", namespace=NS, window=128_000, input_budget=8000, budget=1000)


async def _run(
    scenario: Scenario, healthy: list[FakeSource]
) -> list[tuple[float, SelectionResult | Exception]]:
    """Run the scenario's turns; return each turn's virtual duration and selection."""
    turns = []
    async with (
        open_selector([*healthy, *scenario.faulty], deadline=DEADLINE) as selector,
        open_broker(selector=RecordingSelector(selector), tasks=Tasks(), conversations=Tasks()) as broker,
    ):
        recording = broker._selector
        assert isinstance(recording, RecordingSelector)
        for pause in scenario.pauses:
            start = trio.current_time()
            await broker.assemble(_turn())
            turns.append((trio.current_time() - start, recording.results[-1]))
            await trio.sleep(pause)
    return turns


def _virtual(
    scenario: Scenario, healthy: list[FakeSource]
) -> list[tuple[float, SelectionResult | Exception]]:
    return trio.run(_run, scenario, healthy, clock=trio.testing.MockClock(autojump_threshold=0))


def _healthy_view(result: SelectionResult) -> tuple[Any, ...]:
    """What the healthy sources contributed: their outcomes and their selected memories."""
    names = {s.name for s in _healthy()}
    outcomes = tuple((o.name, o.status, o.candidates, o.error) for o in result.sources if o.name in names)
    blocks = tuple(b for b in result.blocks if b.source in names)
    return outcomes, blocks


def _check(turns: list[tuple[float, SelectionResult | Exception]], expected: tuple[Any, ...]) -> None:
    for elapsed, result in turns:
        assert isinstance(result, SelectionResult), f"the turn's selection failed: {result!r}"
        assert elapsed <= DEADLINE + 1e-9, f"turn took {elapsed} s of virtual time"  # float rounding only
        assert _healthy_view(result) == expected
        assert all(len(b.text) <= MAX_TEXT_CHARS for b in result.blocks)


def _matrix(kinds: Sequence[str], scenarios: int) -> int:
    """Run `scenarios` drawn scenarios of `kinds`; return how many faults were injected."""
    ((_, reference),) = _virtual(Scenario(faulty=(), pauses=(0.0,)), _healthy())
    assert isinstance(reference, SelectionResult)
    expected = _healthy_view(reference)
    injected = [0]

    @settings(
        max_examples=scenarios,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(scenario=_scenarios(kinds))
    def one(scenario: Scenario) -> None:
        # Hypothesis may replay an example: every run starts from fresh sources.
        scenario = attrs.evolve(
            scenario, faulty=tuple(attrs.evolve(s, delivered=[]) for s in scenario.faulty)
        )
        _check(_virtual(scenario, _healthy()), expected)
        injected[0] += sum(1 for s in scenario.faulty for kind in s.delivered if kind != "ok")

    one()
    return injected[0]


def test_no_fault_fails_a_turn_delays_it_or_touches_the_healthy_sources(slow_factor: int) -> None:
    """Thousands of faults at every point of the turn: 0 failed turns, on time, healthy output intact."""
    injected = _matrix(KINDS, CI_SCENARIOS * slow_factor)
    assert injected >= MIN_FAULTS * slow_factor
