"""MemorySelector / open_selector: fail-closed turns under one deadline, on trio and asyncio."""

from __future__ import annotations

import contextlib
import functools
import math
import time

import anyio
import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import (
    BrokerClosedError,
    ConfigError,
    MemorySelector,
    Namespace,
    SessionContext,
    SourceStatus,
    Tally,
    TurnRequest,
    ValidationError,
    count_errors,
    open_selector,
    text_errors,
)
from broker.testing import (
    FailingSource,
    FakeSource,
    HangingSource,
    SelfCancellingSource,
    SlowSource,
    make_candidate,
)

NS = Namespace(tenant_id="acme", project_id="p1")
TASK = "which database did we pick for the billing service"
REAL_CLOCK_DEADLINE = 30.0
"""The deadline of a turn on the real clock that is not about its deadline: one no loaded machine
misses (the default, 100 ms, can be lost to a pause of the event loop while other processes
hold the cores)."""


def _statuses(result) -> dict[str, SourceStatus]:
    return {o.name: o.status for o in result.sources}


def _pending(selector: MemorySelector) -> int:
    return sum(actor.pending for actor in selector._actors)


# --- the deadline and fail-closed, on both backends -------------------------------------------


async def test_hanging_source_is_cut_exactly_at_the_deadline(autojump_clock):
    """A hanging source costs the turn exactly its deadline and never the others' results."""
    good = FakeSource("store", candidates=[make_candidate("m1", 0.9, source="store")])
    slow = SlowSource("graphs", delay=0.05, candidates=[make_candidate("m2", 0.6, source="graphs")])
    hanging = HangingSource("neurons", candidates=[make_candidate("m3", 0.99, source="neurons")])
    async with open_selector([good, hanging, slow], deadline=0.1) as selector:
        start = trio.current_time()
        result = await selector.select_for_task(TASK, namespace=NS)
        assert trio.current_time() - start == 0.1
        await trio.testing.wait_all_tasks_blocked()
        assert hanging.active == 0
    assert _statuses(result) == {
        "store": SourceStatus.OK,
        "neurons": SourceStatus.TIMEOUT,
        "graphs": SourceStatus.OK,
    }
    assert [b.entry_id for b in result.blocks] == ["m1", "m2"]
    assert [o.latency_ms for o in result.sources] == [0.0, 100.0, 50.0]
    assert result.candidates_evaluated == 2


async def test_per_call_deadline_overrides_the_default(autojump_clock):
    """`deadline=` on the call bounds that turn alone."""
    async with open_selector([HangingSource("h")], deadline=0.1) as selector:
        await selector.select_for_task(TASK, namespace=NS, deadline=0.25)
        assert trio.current_time() == 0.25
        await selector.select_for_task(TASK, namespace=NS)
        assert trio.current_time() == 0.35


async def _every_bad_source_turn(deadline: float) -> None:
    """Run one turn over raising, hanging, slow, self-cancelling and leaking sources."""
    good = FakeSource("store", candidates=[make_candidate("m1", 0.8, source="store")])
    sources = [
        good,
        FailingSource("abstraction"),
        HangingSource("neurons"),
        SlowSource("graphs", delay=10.0),
        SelfCancellingSource("consolidated"),
        SelfCancellingSource("persona", leak=True),
    ]
    async with open_selector(sources, deadline=deadline) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert _statuses(result) == {
        "store": SourceStatus.OK,
        "abstraction": SourceStatus.FAILED,
        "neurons": SourceStatus.TIMEOUT,
        "graphs": SourceStatus.TIMEOUT,
        "consolidated": SourceStatus.EMPTY,
        "persona": SourceStatus.FAILED,
    }
    errors = {o.name: o.error for o in result.sources if o.error}
    assert errors["abstraction"] == "RuntimeError"
    assert errors["persona"] in {"Cancelled", "CancelledError"}
    assert [b.entry_id for b in result.blocks] == ["m1"]
    assert all(s.opened == s.closed == 1 and s.active == 0 for s in sources)


async def test_bad_sources_never_fail_the_turn_on_trio(autojump_clock):
    """Each kind of broken source shows its own status; the good one's memory is selected."""
    await _every_bad_source_turn(0.1)


@pytest.mark.parametrize("backend", ["asyncio"])
def test_bad_sources_never_fail_the_turn_on_asyncio(backend):
    """The same fail-closed turn on asyncio (real clock), where most agent runtimes live."""
    anyio.run(_every_bad_source_turn, 0.2, backend=backend)


# Long enough that a loaded host pausing the loop (seen: tens of ms with 2 cores shared by
# several test runs) cannot let the deadline pass before the good source has answered.
REAL_DEADLINE = 0.25


async def _cut_at_deadline_real_clock() -> None:
    good = FakeSource("store", candidates=[make_candidate("m1", 0.9, source="store")])
    hanging = HangingSource("neurons")
    async with open_selector([good, hanging], deadline=REAL_DEADLINE) as selector:
        start = anyio.current_time()
        result = await selector.select_for_task(TASK, namespace=NS)
        elapsed = anyio.current_time() - start
    assert elapsed >= REAL_DEADLINE
    assert _statuses(result) == {"store": SourceStatus.OK, "neurons": SourceStatus.TIMEOUT}
    assert [b.entry_id for b in result.blocks] == ["m1"]
    assert hanging.closed == 1
    assert hanging.active == 0


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_hanging_source_is_cut_at_the_deadline_on_both_backends(backend):
    """The deadline cut works on a real clock on both anyio backends."""
    anyio.run(_cut_at_deadline_real_clock, backend=backend)


REAL_TURNS = 1000
MAX_P99_OVERSHOOT_MS = 5.0
HOST_MARGIN_MS = 1.0
REAL_ROUNDS = 3


def _p99(values: list[float]) -> float:
    return sorted(values)[math.ceil(0.99 * len(values)) - 1]


async def _bare_turn(deadline: float) -> None:
    """The wait a turn is made of, without the broker: a task that answers at once and one that
    hangs, in one task group cut at the deadline."""
    with anyio.move_on_after(deadline):
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep, 0)
            tg.start_soon(anyio.sleep_forever)


async def _overshoots(deadline: float) -> tuple[list[float], list[float]]:
    """Milliseconds past the deadline of REAL_TURNS turns, and of as many bare turns
    (`_bare_turn`: what the host itself adds to the same wait) interleaved with them, on the
    real clock."""
    turns, sleeps = [], []
    # The breaker is off so that every turn waits for the hanging source to its deadline.
    sources = [FakeSource("store", candidates=[make_candidate("m1")]), HangingSource("neurons")]
    async with open_selector(sources, deadline=deadline, breaker_threshold=10**9) as selector:
        for _ in range(REAL_TURNS):
            start = time.perf_counter()
            result = await selector.select_for_task(TASK, namespace=NS)
            turns.append((time.perf_counter() - start - deadline) * 1000)
            assert _statuses(result)["neurons"] is SourceStatus.TIMEOUT
            start = time.perf_counter()
            await _bare_turn(deadline)
            sleeps.append((time.perf_counter() - start - deadline) * 1000)
    return turns, sleeps


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_thousand_real_turns_with_a_hanging_source_overshoot_p99_at_most_5_ms(backend, slow_factor):
    """The deadline holds on a real clock: p99 of the time past it over 1,000 turns <= 5 ms.

    A host too busy to wake even a bare wait on time (other processes on the cores: its p99
    wake-up is itself near one scheduler tick, 4 ms) is allowed its own lateness at the same
    wait without the broker (two tasks, one hanging, in a task group cut at the deadline) plus
    1 ms, so the test measures what the broker adds. On such a host one p99 (the tenth-worst of a
    thousand) is itself noisy, so the bound must hold in one of `REAL_ROUNDS` rounds (a quiet host
    passes the first). CI cuts each turn at 1 ms (the overshoot does not depend on the deadline's
    length); --slow at 50 ms, the deadline the issue measured.
    """
    seen = []
    for _ in range(REAL_ROUNDS):
        turns, sleeps = anyio.run(_overshoots, 0.001 if slow_factor == 1 else 0.05, backend=backend)
        bound = max(MAX_P99_OVERSHOOT_MS, _p99(sleeps) + HOST_MARGIN_MS)
        if _p99(turns) <= bound:
            return
        seen.append(f"p99 {_p99(turns):.2f} ms (bare turn p99 {_p99(sleeps):.2f} ms)")
    pytest.fail("; ".join(seen))


async def _caller_cancellation() -> None:
    sources = [FakeSource("store"), HangingSource("neurons"), SlowSource("graphs", delay=10.0)]
    async with open_selector(sources, deadline=5.0) as selector:
        with anyio.move_on_after(0.02) as scope:
            await selector.select_for_task(TASK, namespace=NS)
        assert scope.cancelled_caught
        await anyio.wait_all_tasks_blocked()
        assert _pending(selector) == 0
        assert all(s.active == 0 for s in sources)
    assert all(s.opened == s.closed == 1 for s in sources)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_caller_cancellation_leaves_nothing_running(backend):
    """Cancelling the caller mid-turn stops every source's work; exit closes every source."""
    anyio.run(_caller_cancellation, backend=backend)


async def test_caller_cancellation_propagates_at_once(autojump_clock):
    """The caller's scope owns time: the turn stops the moment it is cancelled, not at the deadline."""
    async with open_selector([HangingSource("h")], deadline=0.1) as selector:
        with trio.move_on_after(0.03):
            await selector.select_for_task(TASK, namespace=NS)
        assert trio.current_time() == 0.03
        await trio.testing.wait_all_tasks_blocked()
        assert _pending(selector) == 0


# --- overload and the circuit breaker ---------------------------------------------------------


async def test_overloaded_source_is_skipped_at_once(autojump_clock):
    """With its worker busy and mailbox full, a source is reported overloaded without waiting."""
    busy = HangingSource("neurons")
    good = FakeSource("store", candidates=[make_candidate("m1", source="store")])
    results = []

    async def turn() -> None:
        results.append(await selector.select_for_task(TASK, namespace=NS))

    async with (
        open_selector([good, busy], deadline=0.1, mailbox_size=1, concurrency=1, max_turns=None) as selector,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(turn)
        await trio.sleep(0.01)  # busy's only worker hangs on the first turn
        nursery.start_soon(turn)
        await trio.sleep(0.01)  # the second turn's job waits in busy's mailbox
        start = trio.current_time()
        third = await selector.select_for_task(TASK, namespace=NS)
        assert trio.current_time() == start
    assert _statuses(third) == {"store": SourceStatus.OK, "neurons": SourceStatus.OVERLOADED}
    assert [b.entry_id for b in third.blocks] == ["m1"]
    assert [_statuses(r)["neurons"] for r in results] == [SourceStatus.TIMEOUT, SourceStatus.TIMEOUT]


async def test_circuit_breaker_opens_and_recovers(autojump_clock):
    """Three failures trip the source out for the cooldown; a probe afterwards brings it back."""
    flaky = FailingSource("graphs", candidates=[make_candidate("g1", 0.7, source="graphs")])
    async with open_selector([flaky], breaker_threshold=3, breaker_cooldown=30.0) as selector:
        for _ in range(3):
            result = await selector.select_for_task(TASK, namespace=NS)
            assert _statuses(result)["graphs"] is SourceStatus.FAILED
        flaky.failing = False
        result = await selector.select_for_task(TASK, namespace=NS)
        assert _statuses(result)["graphs"] is SourceStatus.OPEN_CIRCUIT
        assert flaky.calls == 3
        await trio.sleep(29.9)
        result = await selector.select_for_task(TASK, namespace=NS)
        assert _statuses(result)["graphs"] is SourceStatus.OPEN_CIRCUIT
        await trio.sleep(0.1)
        result = await selector.select_for_task(TASK, namespace=NS)
        assert _statuses(result)["graphs"] is SourceStatus.OK
        assert [b.entry_id for b in result.blocks] == ["g1"]
        result = await selector.select_for_task(TASK, namespace=NS)
        assert _statuses(result)["graphs"] is SourceStatus.OK


async def test_open_circuit_stops_a_hanging_source_eating_the_deadline(autojump_clock):
    """After three timeouts, turns no longer wait for the hanging source at all."""
    async with open_selector([FakeSource("store"), HangingSource("h")], deadline=0.1) as selector:
        for _ in range(3):
            await selector.select_for_task(TASK, namespace=NS)
        assert trio.current_time() == pytest.approx(0.3)
        start = trio.current_time()
        result = await selector.select_for_task(TASK, namespace=NS)
        assert trio.current_time() == start
    assert _statuses(result)["h"] is SourceStatus.OPEN_CIRCUIT


async def test_failed_probe_reopens_the_circuit(autojump_clock):
    """A probe that fails again keeps the source out for another full cooldown."""
    flaky = FailingSource("graphs")
    async with open_selector([flaky], breaker_threshold=1, breaker_cooldown=10.0) as selector:
        await selector.select_for_task(TASK, namespace=NS)
        await trio.sleep(10.0)
        probe = await selector.select_for_task(TASK, namespace=NS)
        after = await selector.select_for_task(TASK, namespace=NS)
    assert _statuses(probe)["graphs"] is SourceStatus.FAILED
    assert _statuses(after)["graphs"] is SourceStatus.OPEN_CIRCUIT
    assert flaky.calls == 2


async def test_sources_late_together_meet_contention_and_never_trip(autojump_clock):
    """Two sources cut by the same deadline turn after turn: a busy machine, not a faulty source."""
    slow = [SlowSource("store", delay=0.5), SlowSource("persona", delay=0.5)]
    async with open_selector([*slow, FakeSource("neurons")], deadline=0.1) as selector:
        results = [await selector.select_for_task(TASK, namespace=NS) for _ in range(20)]
    assert {_statuses(r)["store"] for r in results} == {SourceStatus.TIMEOUT}
    assert {_statuses(r)["persona"] for r in results} == {SourceStatus.TIMEOUT}
    assert slow[0].calls == 20


async def test_a_source_late_alone_trips_and_is_probed_after_a_growing_short_cooldown(autojump_clock):
    """A hang while the others answer counts; out for 1 s, then 2 s after a failed probe, then back."""
    hanging = FailingSource("graphs", error=RuntimeError("unused"), failing=False, delay=10.0)
    async with open_selector([hanging, FakeSource("store")], deadline=0.1) as selector:
        for _ in range(3):
            await selector.select_for_task(TASK, namespace=NS)
        opened = trio.current_time()
        assert opened == pytest.approx(0.3)
        result = await selector.select_for_task(TASK, namespace=NS)
        assert _statuses(result)["graphs"] is SourceStatus.OPEN_CIRCUIT
        await trio.sleep_until(opened + 1.0)
        probe = await selector.select_for_task(TASK, namespace=NS)
        assert _statuses(probe)["graphs"] is SourceStatus.TIMEOUT
        reopened = trio.current_time()
        await trio.sleep_until(reopened + 1.999)
        result = await selector.select_for_task(TASK, namespace=NS)
        assert _statuses(result)["graphs"] is SourceStatus.OPEN_CIRCUIT
        hanging.delay = 0.0
        await trio.sleep_until(reopened + 2.0)
        back = await selector.select_for_task(TASK, namespace=NS)
    assert _statuses(back)["graphs"] is SourceStatus.EMPTY
    assert hanging.calls == 5


# --- lifecycle ----------------------------------------------------------------------------------


async def test_sources_are_opened_before_the_first_turn_and_closed_on_exit():
    """Resources are acquired before any deadline runs and released when the selector closes."""
    sources = [FakeSource("a"), FakeSource("b")]
    async with open_selector(sources) as selector:
        assert [(s.opened, s.closed) for s in sources] == [(1, 0), (1, 0)]
        assert selector.source_names == ("a", "b")
    assert [(s.opened, s.closed) for s in sources] == [(1, 1), (1, 1)]
    assert selector.closed


async def test_use_after_close_raises_broker_closed_error():
    """A closed selector refuses turns loudly: that is the caller's bug, not a source's."""
    async with open_selector([FakeSource("a")]) as selector:
        pass
    with pytest.raises(BrokerClosedError):
        await selector.select_for_task(TASK, namespace=NS)


async def test_closing_mid_turn_ends_the_turn_with_closed_sources(autojump_clock):
    """A turn still running when the selector closes returns at once, its sources failed/closed."""
    hanging = HangingSource("h")
    results = []
    async with trio.open_nursery() as nursery:
        async with open_selector([hanging], deadline=10.0) as selector:

            async def turn() -> None:
                results.append(await selector.select_for_task(TASK, namespace=NS))

            nursery.start_soon(turn)
            await trio.sleep(1.0)
        assert hanging.closed == 1
    assert trio.current_time() == 1.0
    assert [(o.status, o.error) for o in results[0].sources] == [(SourceStatus.FAILED, "BrokerClosedError")]


async def test_a_source_that_cannot_open_is_failed_and_the_rest_serve():
    """One broken source at startup does not take the selector down; it is reported each turn."""

    class Unopenable(FakeSource):
        async def open(self) -> None:
            await super().open()
            raise FileNotFoundError("model.onnx")

    broken, good = Unopenable("dense"), FakeSource("store", candidates=[make_candidate("m1")])
    async with open_selector([broken, good], deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert [(o.status, o.error) for o in result.sources] == [
        (SourceStatus.FAILED, "FileNotFoundError"),
        (SourceStatus.OK, None),
    ]
    assert broken.closed == good.closed == 1


async def test_body_error_propagates_unwrapped_and_sources_close():
    """An error in the caller's block comes out as itself, not in an ExceptionGroup."""
    source = FakeSource("a")
    with pytest.raises(KeyError):
        async with open_selector([source]):
            raise KeyError("caller bug")
    assert source.closed == 1


async def test_outer_cancellation_exits_cleanly(autojump_clock):
    """Cancelling the scope around the whole selector closes everything and is absorbed there."""
    source = HangingSource("h")
    with trio.move_on_after(1.0) as scope:
        async with open_selector([source], deadline=5.0) as selector:
            await selector.select_for_task(TASK, namespace=NS)
    assert scope.cancelled_caught
    assert trio.current_time() == 1.0
    assert (source.closed, source.active) == (1, 0)


@pytest.mark.parametrize(
    ("sources", "options"),
    [
        ([FakeSource("a"), FakeSource("a")], {}),
        ([object()], {}),
        ([FakeSource("a")], {"deadline": 0}),
        ([FakeSource("a")], {"deadline": math.nan}),
        ([FakeSource("a")], {"mailbox_size": 0}),
        ([FakeSource("a")], {"concurrency": 0}),
        ([FakeSource("a")], {"breaker_threshold": 0}),
        ([FakeSource("a")], {"breaker_cooldown": -1.0}),
        ([FakeSource("a")], {"breaker_max_cooldown": 0}),
        ([FakeSource("a")], {"mode": "psychic"}),
    ],
)
async def test_bad_configuration_is_a_config_error(sources, options):
    """Duplicate names, non-sources and nonsense options fail before anything is opened."""
    with pytest.raises(ConfigError):
        async with open_selector(sources, **options):
            pass  # pragma: no cover
    assert all(s.opened == 0 for s in sources if isinstance(s, FakeSource))


# --- the request and the result ----------------------------------------------------------------


async def test_selection_counts_below_floor_dedupes_and_records_finders():
    """Below-floor candidates are evaluated but never selected; duplicates merge and count once, finders kept."""
    store = FakeSource(
        "store",
        candidates=[make_candidate("m1", 0.7, source="store"), make_candidate("weak", 0.2, source="store")],
    )
    graphs = FakeSource("graphs", candidates=[make_candidate("m1", 0.9, source="graphs")])
    async with open_selector([store, graphs], deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS, budget=5)
    assert result.candidates_evaluated == 2
    assert result.memories == Tally(candidates=2, cleared=1)
    assert [(b.entry_id, b.source, b.sources, b.score) for b in result.blocks] == [
        ("m1", "graphs", ("store", "graphs"), 0.9)
    ]
    assert result.selected_count == 1
    assert result.irrelevant_memory_rate == pytest.approx(1 / 2)


async def test_cleared_floor_is_counted_before_the_budget_cap():
    """A memory cut by the budget still counts as cleared: it was relevant, not irrelevant."""
    many = FakeSource("store", candidates=[make_candidate(f"m{i}", 0.5 + i / 100) for i in range(6)])
    weak = FakeSource("graphs", candidates=[make_candidate("w", 0.1, source="graphs")])
    async with open_selector([many, weak], deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS, budget=2)
    assert result.selected_count == 2
    assert result.memories == Tally(candidates=7, cleared=6)
    assert result.irrelevant_memory_rate == pytest.approx(1 / 7)


async def test_trivial_task_abstains_when_nothing_clears_the_floor():
    """Only weak candidates: zero blocks, abstained, and the candidates still counted."""
    weak = FakeSource("store", candidates=[make_candidate(f"m{i}", 0.3) for i in range(5)])
    async with open_selector([weak], deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task("what time is it", namespace=NS)
    assert result.abstained
    assert result.blocks == ()
    assert result.candidates_evaluated == 5


async def test_budget_caps_the_selection():
    """`budget` is a count of memories: never more blocks than that, best first."""
    many = FakeSource("store", candidates=[make_candidate(f"m{i}", 0.5 + i / 100) for i in range(20)])
    async with open_selector([many], deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS, budget=3)
    assert [b.entry_id for b in result.blocks] == ["m19", "m18", "m17"]
    assert result.candidates_evaluated == 20


async def test_request_carries_task_namespace_types_context_mode_and_limit():
    """Sources get everything they need, and room to return more than the budget."""
    source = FakeSource("store")
    context = SessionContext(persona="reviewer")
    async with open_selector([source], mode="lexical", deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(
            TASK, namespace=NS, types=["semantic", "self"], budget=3, context=context
        )
        wide = await selector.select_for_task(TASK, namespace=NS, budget=40, mode="hybrid")
    first, second = source.requests
    assert (first.task, first.namespace, first.types, first.context) == (
        TASK,
        NS,
        ("semantic", "self"),
        context,
    )
    assert (first.limit, first.mode) == (10, "lexical")
    assert (second.limit, second.mode, second.types) == (40, "hybrid", None)
    assert result.types_queried == ("semantic", "self")
    assert (result.mode, wide.mode, wide.types_queried) == ("lexical", "hybrid", None)


@pytest.mark.parametrize(
    ("kwargs", "fields"),
    [
        ({"task_description": "  "}, {"task"}),
        ({"budget": 0}, {"budget"}),
        ({"budget": True}, {"budget"}),
        ({"types": ["episodic", "dreams"]}, {"types"}),
        ({"types": []}, {"types"}),
        ({"types": "episodic"}, {"types"}),
        ({"namespace": "acme"}, {"namespace"}),
        ({"deadline": -1}, {"deadline"}),
        ({"mode": "psychic"}, {"mode"}),
        ({"task_description": "", "budget": 0, "types": ["x"]}, {"task", "budget", "types"}),
        ({"task_description": "x" * 120_000}, {"task"}),
        ({"task_description": "lone \ud800 surrogate"}, {"task"}),
        ({"task_description": "nul \x00 byte"}, {"task"}),
        ({"budget": 99999999999999999999}, {"budget"}),
        ({"budget": 1001}, {"budget"}),
    ],
)
async def test_invalid_input_is_a_validation_error_naming_every_field(kwargs, fields):
    """Bad input is refused before any source is asked, with every field error at once."""
    source = FakeSource("store")
    call = {"task_description": TASK, "namespace": NS} | kwargs
    async with open_selector([source]) as selector:
        with pytest.raises(ValidationError) as caught:
            await selector.select_for_task(**call)
    assert {e.field for e in caught.value.errors} == fields
    assert source.calls == 0


@pytest.mark.parametrize(
    ("task", "budget", "errors"),
    [
        ("x" * 120_000, 10, [("task", "too_long", "must be at most 32000 chars")]),
        ("bad \udc80 text", 10, [("task", "encoding", "must be valid Unicode (no lone surrogates)")]),
        (TASK, 10**20, [("budget", "out_of_range", "must be an integer in 1..1000")]),
    ],
)
async def test_request_errors_are_the_recall_field_errors(task, budget, errors):
    """`select` refuses what `recall` refuses, with the same codes and messages."""
    async with open_selector([FakeSource("store")]) as selector:
        with pytest.raises(ValidationError) as caught:
            await selector.select_for_task(task, namespace=NS, budget=budget)
    assert [(e.field, e.code, e.message) for e in caught.value.errors] == errors


@settings(max_examples=200, deadline=None)
@given(
    task=st.one_of(st.text(max_size=50), st.integers(31_990, 32_010).map(lambda n: "a" * n)),
    budget=st.one_of(st.integers(), st.booleans(), st.floats(allow_nan=True)),
)
def test_sources_only_ever_receive_valid_requests(task, budget):
    """Whatever a caller passes, a source is asked only with a task and limit that recall accepts."""
    source = FakeSource("store")

    async def turn() -> None:
        async with open_selector([source], deadline=REAL_CLOCK_DEADLINE) as selector:
            with contextlib.suppress(ValidationError):
                await selector.select_for_task(task, namespace=NS, budget=budget)

    trio.run(turn)
    for request in source.requests:
        assert text_errors("query", request.task) == []
        assert count_errors("limit", request.limit) == []


# --- overload: turns beyond max_turns wait in line ---------------------------------------------


async def test_turns_beyond_max_turns_queue_and_all_complete(autojump_clock):
    """Four turns at a limit of two: two wait one source's time, and every source answers."""
    source = FakeSource("store", delay=0.01, candidates=[make_candidate("m1", 0.9, source="store")])
    results = []
    async with open_selector([source], deadline=0.1, max_turns=2) as selector:

        async def turn() -> None:
            results.append(await selector.select_for_task(TASK, namespace=NS))

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(turn)
    assert trio.current_time() == 0.02
    assert all(_statuses(r) == {"store": SourceStatus.OK} for r in results)
    assert sorted(r.queued_ms for r in results) == [0.0, 0.0, 10.0, 10.0]


async def test_the_wait_in_line_counts_against_the_deadline(autojump_clock):
    """A turn served late gets only what is left of its deadline: cut at it, never past it."""
    source = FakeSource("store", delay=0.06)
    ends = []
    async with open_selector([source], deadline=0.1, max_turns=1) as selector:

        async def turn() -> None:
            result = await selector.select_for_task(TASK, namespace=NS)
            ends.append((trio.current_time(), _statuses(result)["store"]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(turn)
            nursery.start_soon(turn)
    assert sorted(ends) == [(0.06, SourceStatus.EMPTY), (0.1, SourceStatus.TIMEOUT)]


async def test_a_turn_that_cannot_be_served_in_time_answers_overloaded(autojump_clock):
    """Once turns are known to take 60 ms, a turn still in line 40 ms before its deadline
    gives up then: every source `overloaded`, none asked, no exception."""
    source = FakeSource("store", delay=0.06)
    async with open_selector([source], deadline=0.1, max_turns=1) as selector:
        await selector.select_for_task(TASK, namespace=NS)  # one served turn: 60 ms
        start, late = trio.current_time(), []

        async def second() -> None:
            late.append(await selector.select_for_task(TASK, namespace=NS))
            assert trio.current_time() - start == 0.1 - 0.06

        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(selector.select_for_task, TASK, namespace=NS))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(second)
    assert _statuses(late[0]) == {"store": SourceStatus.OVERLOADED}
    assert late[0].queued_ms == 1000 * (0.1 - 0.06)
    assert late[0].abstained
    assert source.calls == 2
    assert selector._actors[0].breaker.allow(trio.current_time())


async def test_max_turns_none_runs_every_turn_at_once(autojump_clock):
    """Without a limit, as many turns as the source's workers run together and none waits."""
    source = FakeSource("store", delay=0.01)
    results = []
    async with open_selector([source], deadline=0.1, max_turns=None) as selector:

        async def turn() -> None:
            results.append(await selector.select_for_task(TASK, namespace=NS))

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(turn)
    assert trio.current_time() == 0.01
    assert [r.queued_ms for r in results] == [0.0] * 4


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4"])
async def test_max_turns_must_be_a_positive_integer(bad):
    """A bad limit is a ConfigError before any source opens."""
    with pytest.raises(ConfigError, match="max_turns"):
        async with open_selector([FakeSource("store")], max_turns=bad):
            pass  # pragma: no cover


# --- the recall mode ---------------------------------------------------------------------------


@attrs.define(eq=False)
class StoreLikeSource(FakeSource):
    """A fake that says its own recall mode, as a store's sources say their store's."""

    default_mode: str = "hybrid"


async def test_without_a_mode_the_selector_takes_its_sources_and_asks_every_source_in_it():
    """The mode the sources run and the mode the result reports are one: the sources' own."""
    plain, store = FakeSource("plain"), StoreLikeSource("store", default_mode="hybrid")
    async with open_selector([plain, store], deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert selector.mode == "hybrid"
    assert result.mode == "hybrid"
    assert [r.mode for r in (*plain.requests, *store.requests)] == ["hybrid", "hybrid"]


async def test_an_explicit_mode_outranks_the_sources_own():
    """`open_selector(mode=...)` is the mode of every turn that names none, whatever the sources say."""
    store = StoreLikeSource("store", default_mode="hybrid")
    async with open_selector([store], mode="lexical", deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert (selector.mode, result.mode, store.requests[0].mode) == ("lexical", "lexical", "lexical")


async def test_with_no_source_naming_a_mode_the_selector_is_lexical():
    """Fakes that name no mode get the default, and the request carries it (never None)."""
    plain = FakeSource("plain")
    async with open_selector([plain], deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert (selector.mode, result.mode, plain.requests[0].mode) == ("lexical", "lexical", "lexical")


async def test_select_takes_a_built_request_with_its_absolute_deadline(autojump_clock):
    """`select(TurnRequest)` stops every source at the request's own deadline, on the loop's clock."""
    async with open_selector([HangingSource("hang")], deadline=5) as selector:
        start = trio.current_time()
        request = TurnRequest(task=TASK, namespace=NS, deadline=start + 0.2, mode=selector.mode)
        result = await selector.select(request)
        assert trio.current_time() - start == pytest.approx(0.2, abs=1e-9)
    assert [s.status for s in result.sources] == [SourceStatus.TIMEOUT]


async def test_memories_a_source_considered_are_counted_never_selected():
    """Sources sharing one retrieval report it once: 3 considered, 1 returned and cleared."""
    shared = frozenset({(0, 1), (0, 2), (1, 5)})
    sources = [
        FakeSource("store", [make_candidate("m1", 0.9, retrieval_key=(0, 1))], considered=shared),
        FakeSource("facts", [], considered=shared),
        FakeSource("plain", [make_candidate("m9", 0.2)]),
    ]
    async with open_selector(sources, deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert [b.entry_id for b in result.blocks] == ["m1"]
    assert result.memory_tally == Tally(candidates=4, cleared=1)
    assert result.irrelevant_memory_rate == 0.75


async def test_an_abstaining_turn_with_considered_memories_has_an_irrelevant_rate_of_one():
    """Nothing cleared the floor, yet the sources weighed two memories: rate 1.0, not null."""
    async with open_selector(
        [FakeSource("store", [], considered=frozenset({"x", "y"}))], deadline=REAL_CLOCK_DEADLINE
    ) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert result.abstained
    assert result.memory_tally == Tally(candidates=2, cleared=0)
    assert result.irrelevant_memory_rate == 1.0


async def test_a_closed_gate_is_reported_though_no_source_returned_a_candidate():
    """Sources that returned nothing under a closed gate still report it: the turn's qpp is 0.3."""
    sources = [FakeSource("store", [], qpp=0.3), FakeSource("facts", [], qpp=0.3), FakeSource("plain", [])]
    async with open_selector(sources, deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert result.abstained
    assert result.qpp == 0.3


async def test_no_gate_read_leaves_qpp_unknown():
    """Sources that answer plain sequences read no gate: without a candidate the turn's qpp is None."""
    async with open_selector([FakeSource("plain", [])], deadline=REAL_CLOCK_DEADLINE) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert result.qpp is None


async def test_a_late_sources_gate_is_not_reported(autojump_clock):
    """A source cut at the deadline reports nothing, its gate included: the turn's qpp is None."""
    async with open_selector([SlowSource("store", [], delay=5.0, qpp=0.3)], deadline=0.1) as selector:
        result = await selector.select_for_task(TASK, namespace=NS)
    assert result.qpp is None
