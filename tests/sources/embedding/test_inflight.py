"""`sources.embedding._inflight`: model runs are counted, and the process's exit waits for the
runs a deadline abandoned instead of aborting under them (exit code 134)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from sources.embedding import _inflight

_ABANDONED_RUNS = textwrap.dedent(
    """
    import threading
    import time
    from sources.embedding._embedder import load_default_embedder

    embedder = load_default_embedder()
    started = threading.Event()

    def abandoned() -> None:  # a turn's embedding left running by its deadline, again and again
        started.set()
        while True:
            embedder.embed(["the nightly export job writes its files to the finance bucket"])

    threading.Thread(target=abandoned, daemon=True).start()
    started.wait()
    time.sleep(0.2)  # the thread is in its loop: nearly all of the time inside a model run
    print("answered", flush=True)
    """
)


def test_the_process_exits_cleanly_while_an_abandoned_thread_embeds() -> None:
    """Exiting with a daemon thread inside onnxruntime ends with exit code 0, not an abort."""
    ran = subprocess.run(
        [sys.executable, "-c", _ABANDONED_RUNS], check=False, capture_output=True, text=True, timeout=120
    )
    assert "terminate called" not in ran.stderr
    assert (ran.returncode, ran.stdout) == (0, "answered\n")


def test_wait_idle_waits_for_a_run_in_another_thread() -> None:
    """A run in flight keeps the count above zero until it ends; then wait_idle returns True."""
    inside, release = threading.Event(), threading.Event()

    def run() -> None:
        with _inflight.model_run():
            inside.set()
            release.wait(30)

    worker = threading.Thread(target=run)
    worker.start()
    inside.wait(30)
    assert _inflight.wait_idle(0.0) is False
    release.set()
    assert _inflight.wait_idle(30) is True
    worker.join(30)


def test_no_new_run_once_the_process_exits() -> None:
    """After the exit hook a model run is refused with ExitingError (in a child process)."""
    code = textwrap.dedent(
        """
        from sources.embedding import _inflight
        _inflight._at_exit()
        try:
            with _inflight.model_run():
                pass
        except _inflight.ExitingError as exc:
            print(type(exc).__name__)
        """
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert (ran.returncode, ran.stdout) == (0, "ExitingError\n")
