"""run_sync_interruptible: blocking SQLite in a worker thread that a cancelled scope stops.

Real threads, so the real clock: these tests assert outcomes, never durations.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import anyio
import pytest

from sources.storage._threads import Job, run_sync_interruptible

BACKENDS = ["trio", "asyncio"]
LONG_COUNT = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
    "SELECT count(*) FROM c"
)
SAFETY_SECONDS = 20.0


def _connect() -> tuple[sqlite3.Connection, dict[str, bool]]:
    """Open an in-memory connection with a safety net: a broken interrupt fails, never hangs."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    flags = {"safety_net": False}
    give_up = time.monotonic() + SAFETY_SECONDS

    def safety_net() -> bool:
        if time.monotonic() > give_up:
            flags["safety_net"] = True
            return True
        return False

    conn.set_progress_handler(safety_net, 100_000)
    return conn, flags


async def _long_query_is_interrupted() -> None:
    conn, flags = _connect()
    limiter = anyio.CapacityLimiter(1)
    errors: list[str] = []

    def count() -> int:
        try:
            return int(conn.execute(LONG_COUNT).fetchone()[0])
        except sqlite3.OperationalError as exc:
            errors.append(str(exc))
            raise

    try:
        with anyio.move_on_after(0.2) as scope:
            await run_sync_interruptible(count, interrupt=conn.interrupt, limiter=limiter)
        assert scope.cancelled_caught
        assert errors == ["interrupted"]
        assert not flags["safety_net"]
        assert limiter.borrowed_tokens == 0
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)
    finally:
        conn.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_long_query_is_interrupted_when_the_scope_expires(backend):
    """A query still running at the deadline is stopped by interrupt(); the connection still works."""
    anyio.run(_long_query_is_interrupted, backend=backend)


async def _normal_result() -> None:
    conn, _ = _connect()
    interrupts: list[int] = []
    try:
        value = await run_sync_interruptible(
            lambda: conn.execute("SELECT 6 * 7").fetchone()[0],
            interrupt=lambda: interrupts.append(1),
            limiter=anyio.CapacityLimiter(1),
        )
    finally:
        conn.close()
    assert value == 42
    assert interrupts == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_result_is_returned_and_nothing_interrupted(backend):
    """Without cancellation the function's result comes back and interrupt is never called."""
    anyio.run(_normal_result, backend=backend)


async def _error_propagates() -> None:
    conn, _ = _connect()
    limiter = anyio.CapacityLimiter(1)
    try:
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await run_sync_interruptible(
                lambda: conn.execute("SELECT * FROM missing").fetchall(),
                interrupt=conn.interrupt,
                limiter=limiter,
            )
    finally:
        conn.close()
    assert limiter.borrowed_tokens == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_error_in_the_thread_propagates_and_frees_the_limiter(backend):
    """A failing statement raises its own error to the caller and gives back the token."""
    anyio.run(_error_propagates, backend=backend)


async def _waiting_for_token_is_cancellable() -> None:
    limiter = anyio.CapacityLimiter(1)
    calls: list[int] = []
    holder = object()
    limiter.acquire_on_behalf_of_nowait(holder)
    try:
        with anyio.move_on_after(0.05) as scope:
            await run_sync_interruptible(lambda: calls.append(1), interrupt=lambda: None, limiter=limiter)
    finally:
        limiter.release_on_behalf_of(holder)
    assert scope.cancelled_caught
    assert calls == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_waiting_for_a_limiter_token_is_cancellable(backend):
    """The limiter bounds threads; a caller stuck behind it can still be cancelled, and runs nothing."""
    anyio.run(_waiting_for_token_is_cancellable, backend=backend)


async def _thread_finishes_before_the_call_returns() -> None:
    release = threading.Event()
    finished: list[str] = []

    def blocked() -> None:
        release.wait(SAFETY_SECONDS)
        time.sleep(0.05)  # still working a moment after the interrupt
        finished.append("thread")

    with anyio.move_on_after(0.05) as scope:
        await run_sync_interruptible(blocked, interrupt=release.set, limiter=anyio.CapacityLimiter(1))
    finished.append("call")
    assert scope.cancelled_caught
    assert finished == ["thread", "call"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_call_returns_only_after_its_thread_has_finished(backend):
    """Cancellation interrupts the thread and then waits for it: no thread outlives its call."""
    anyio.run(_thread_finishes_before_the_call_returns, backend=backend)


async def _slow_interrupt_leaves_the_loop_free() -> None:
    release = threading.Event()
    ticks: list[float] = []

    def slow_interrupt() -> None:
        time.sleep(0.3)  # a cancel that is a round trip to a busy server
        release.set()

    async def ticking() -> None:
        for _ in range(20):
            await anyio.sleep(0.01)
            ticks.append(time.monotonic())

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticking)
        with anyio.move_on_after(0.02):
            await run_sync_interruptible(
                lambda: release.wait(SAFETY_SECONDS),
                interrupt=slow_interrupt,
                limiter=anyio.CapacityLimiter(1),
            )
        stopped = time.monotonic()
    assert release.is_set()
    assert len(ticks) == 20
    assert sum(t < stopped for t in ticks) >= 10  # the loop ticked on while the interrupt blocked


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_interrupt_that_blocks_never_stalls_the_event_loop(backend):
    """A slow interrupt runs in a worker thread: other tasks of the loop keep running while it blocks."""
    anyio.run(_slow_interrupt_leaves_the_loop_free, backend=backend)


def test_stopping_a_job_that_already_finished_returns_at_once() -> None:
    """A job whose function returned, then abandoned (the deadline came late), is not waited for."""
    job = Job(lambda: 42)
    assert job.run() == 42
    assert job.abandon() is True  # it had started
    stopper = threading.Thread(target=job.stop, args=(lambda: None,), daemon=True)
    stopper.start()
    stopper.join(SAFETY_SECONDS)
    assert not stopper.is_alive()  # it would wait forever for a finish that already happened


def test_stopping_a_running_job_waits_until_its_thread_is_done() -> None:
    """stop() interrupts and returns only after the function returned, however the two race."""
    for _ in range(200):
        running, gate, finished = threading.Event(), threading.Event(), []

        def work(running=running, gate=gate, finished=finished) -> None:
            running.set()
            gate.wait(SAFETY_SECONDS)
            finished.append(1)

        job = Job(work)
        worker = threading.Thread(target=job.run)
        worker.start()
        assert running.wait(SAFETY_SECONDS)
        assert job.abandon() is True
        job.stop(gate.set)
        assert finished == [1]
        worker.join(SAFETY_SECONDS)
