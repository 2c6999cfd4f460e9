"""run_together: calls run at the same time on helper threads, results in order, every call
finished before it returns, errors re-raised, and a forked child gets helpers of its own."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from sources._together import HELPERS, run_together


def test_results_come_back_in_the_order_of_the_calls() -> None:
    """Each result sits where its call was, whatever finished first."""
    calls = [lambda i=i: (time.sleep(0.01 * (3 - i)), i)[1] for i in range(3)]
    assert run_together(calls) == [0, 1, 2]
    assert run_together([]) == []
    assert run_together([lambda: "one"]) == ["one"]


def test_the_calls_run_at_the_same_time() -> None:
    """Three calls that each wait for the other two finish: run one after another, they could not."""
    barrier = threading.Barrier(HELPERS + 1, timeout=5)
    assert sorted(run_together([barrier.wait] * (HELPERS + 1))) == list(range(HELPERS + 1))


def test_the_first_call_runs_on_the_callers_thread() -> None:
    """The caller works too: its thread runs the first call, helpers the rest."""
    names = run_together([lambda: threading.current_thread().name] * 2)
    assert names[0] == threading.current_thread().name
    assert names[1].startswith("context-broker-helper")


def test_an_error_is_raised_once_every_call_has_finished() -> None:
    """A failing call raises to the caller, but only after the calls still running are done."""
    finished = threading.Event()

    def slow() -> None:
        time.sleep(0.05)
        finished.set()

    def fails() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_together([fails, slow])
    assert finished.is_set()
    finished.clear()
    with pytest.raises(ValueError, match="boom"):
        run_together([slow, fails])
    assert finished.is_set()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_calls_on_helpers_of_its_own() -> None:
    """Helpers made before a fork are not in the child: its calls still run (not queued forever)."""
    run_together([lambda: 1, lambda: 2])  # the parent's helpers exist
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by exit code
        try:
            ok = run_together([lambda: 1, lambda: 2, lambda: 3]) == [1, 2, 3]
        finally:
            sys.stdout.flush()
        os._exit(0 if ok else 1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's calls never ran")
