"""ReadLane: a store's reads queued to its worker threads, run back to back, cancelled one by one.

Real threads, so the real clock: these tests assert outcomes, never durations.
"""

from __future__ import annotations

import functools
import gc
import os
import subprocess
import sys
import threading
import warnings

import anyio
import pytest

from broker import BrokerClosedError
from sources.storage._lane import ReadLane

BACKENDS = ["trio", "asyncio"]
WAIT = 20.0  # a safety net: a broken lane fails the test, never hangs it


def _noop() -> None:
    return None


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_queued_at_once_run_in_one_thread_in_order_each_answering_its_caller(backend: str) -> None:
    """Eight reads submitted together run on the lane's one thread, in order; each caller gets its own answer."""
    lane = ReadLane(1)
    ran: list[tuple[int, int]] = []

    def read(i: int) -> int:
        ran.append((i, threading.get_ident()))
        return i * 10

    async def main() -> list[int]:
        answers = [0] * 8

        async def one(i: int) -> None:
            answers[i] = await lane.run(lambda: read(i), interrupt=_noop)

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, i)
        return answers

    try:
        assert anyio.run(main, backend=backend) == [i * 10 for i in range(8)]
    finally:
        lane.close()
    assert len({ident for _, ident in ran}) == 1
    assert threading.get_ident() not in {ident for _, ident in ran}
    assert sorted(i for i, _ in ran) == list(range(8))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_queued_read_never_runs_and_the_others_still_answer(backend: str) -> None:
    """A read cancelled while queued behind another is dropped; the reads around it complete."""
    lane = ReadLane(1)
    release = threading.Event()
    ran: list[str] = []

    def first() -> str:
        release.wait(WAIT)
        ran.append("first")
        return "first"

    def record(name: str) -> str:
        ran.append(name)
        return name

    async def main() -> tuple[str, bool, str]:
        results: dict[str, str] = {}

        async def run(name: str, fn: object) -> None:
            results[name] = await lane.run(fn, interrupt=_noop)  # type: ignore[arg-type]

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "first", first)
            await anyio.sleep(0.05)
            with anyio.move_on_after(0.05) as scope:
                await lane.run(lambda: record("cancelled"), interrupt=_noop)
            assert lane._queue is not None
            assert not lane._queue._reads  # out of the queue at once: it holds no wake back
            tg.start_soon(run, "third", lambda: record("third"))
            await anyio.sleep(0.05)
            release.set()
        return results["first"], scope.cancelled_caught, results["third"]

    try:
        assert anyio.run(main, backend=backend) == ("first", True, "third")
    finally:
        lane.close()
    assert ran == ["first", "third"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_running_read_is_interrupted_and_waited_for(backend: str) -> None:
    """A read cancelled while it runs is interrupted; the call returns only once its thread is done with it."""
    lane = ReadLane(1)
    interrupted = threading.Event()
    finished = threading.Event()

    def slow() -> None:
        interrupted.wait(WAIT)
        finished.set()
        raise RuntimeError("interrupted")

    async def main() -> bool:
        with anyio.move_on_after(0.1) as scope:
            await lane.run(slow, interrupt=interrupted.set)
        assert finished.is_set()
        return scope.cancelled_caught

    try:
        assert anyio.run(main, backend=backend) is True
    finally:
        lane.close()
    assert interrupted.is_set()


def test_an_error_reaches_only_the_caller_whose_read_raised() -> None:
    """A read that raises fails its own call; the next read on the lane answers."""
    lane = ReadLane(1)

    def bad() -> int:
        raise ValueError("bad row")

    async def main() -> int:
        with pytest.raises(ValueError, match="bad row"):
            await lane.run(bad, interrupt=_noop)
        return await lane.run(lambda: 7, interrupt=_noop)

    try:
        assert anyio.run(main, backend="trio") == 7
    finally:
        lane.close()


def test_a_closed_lane_refuses_reads_and_drops_the_queued_ones() -> None:
    """Closing the lane fails its queued reads and every later one with BrokerClosedError."""
    lane = ReadLane(1)
    release = threading.Event()
    outcomes: list[str] = []

    async def main() -> None:
        async def queued() -> None:
            try:
                await lane.run(lambda: outcomes.append("ran"), interrupt=_noop)
            except BrokerClosedError:
                outcomes.append("closed")

        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(lane.run, lambda: release.wait(WAIT), interrupt=_noop))
            await anyio.sleep(0.05)
            tg.start_soon(queued)
            await anyio.sleep(0.05)
            lane.close()
            release.set()
        with pytest.raises(BrokerClosedError):
            await lane.run(lambda: None, interrupt=_noop)

    anyio.run(main, backend="trio")
    assert outcomes == ["closed"]


def test_a_lane_needs_a_thread() -> None:
    """A lane of no threads is refused when it is made."""
    with pytest.raises(ValueError, match="threads"):
        ReadLane(0)


def test_a_forked_child_reads_in_threads_of_its_own() -> None:
    """A lane used before a fork still answers in the child (the parent's threads are not there)."""
    lane = ReadLane(1)
    assert anyio.run(functools.partial(lane.run, lambda: 1, interrupt=_noop), backend="trio") == 1
    with warnings.catch_warnings():  # Python 3.12+ warns of fork() with threads: this test forks on purpose
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the read answers (in time: a lost read hangs)
        code = 1
        try:

            async def child() -> int | None:
                with anyio.move_on_after(WAIT):
                    return await lane.run(lambda: 2, interrupt=_noop)
                return None

            code = 0 if anyio.run(child, backend="trio") == 2 else 1
        finally:
            os._exit(code)  # never back into pytest
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        lane.close()
    assert os.waitstatus_to_exitcode(status) == 0


_FORK_WITH_THE_QUEUE_LOCKED = """
import functools, os, sys, threading, warnings
import anyio
from sources.storage._lane import ReadLane

lane = ReadLane(1)
assert anyio.run(functools.partial(lane.run, lambda: 1, interrupt=lambda: None), backend="trio") == 1
held, release = threading.Event(), threading.Event()

def hold() -> None:
    with lane._queue._queued:  # a parent's thread inside the queue's lock at the fork
        held.set()
        release.wait()

threading.Thread(target=hold).start()
held.wait()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    pid = os.fork()
if pid == 0:  # the child reads, then exits normally: the interpreter's exit runs the finalizers
    assert anyio.run(functools.partial(lane.run, lambda: 2, interrupt=lambda: None), backend="trio") == 2
    sys.exit(0)
release.set()
_, status = os.waitpid(pid, 0)
lane.close()
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_exits_although_the_parents_queue_was_locked_at_the_fork() -> None:
    """The child forgets the parent's queue without closing it: its exit never waits on a lock a parent's thread held."""
    done = subprocess.run([sys.executable, "-c", _FORK_WITH_THE_QUEUE_LOCKED], timeout=WAIT * 2, check=False)
    assert done.returncode == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_finished_reads_caller_is_woken_while_a_long_read_behind_it_still_runs(backend: str) -> None:
    """Callers are woken in batches, but never held back by a read still running: the first answer arrives before the second read ends."""
    lane = ReadLane(1)
    second_queued, release = threading.Event(), threading.Event()
    seen: list[str] = []

    async def main() -> None:
        async def first() -> None:
            with anyio.move_on_after(WAIT):
                await lane.run(lambda: second_queued.wait(WAIT), interrupt=_noop)
                seen.append("released" if release.is_set() else "running")
            release.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await anyio.sleep(0.05)  # the first read runs, waiting for the second to be queued
            tg.start_soon(functools.partial(lane.run, lambda: release.wait(WAIT), interrupt=_noop))
            await anyio.sleep(0.05)
            second_queued.set()

    try:
        anyio.run(main, backend=backend)
    finally:
        lane.close()
    assert seen == ["running"]


def test_a_dropped_lane_ends_its_threads() -> None:
    """A lane garbage-collected without close lets its worker threads end (they do not pile up)."""
    lane = ReadLane(2)
    assert anyio.run(functools.partial(lane.run, lambda: 1, interrupt=_noop), backend="trio") == 1
    names = {t.name for t in threading.enumerate() if t.name.startswith("context-broker-read")}
    assert names
    del lane
    gc.collect()
    for thread in [t for t in threading.enumerate() if t.name in names]:
        thread.join(WAIT)
        assert not thread.is_alive()
