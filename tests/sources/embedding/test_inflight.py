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


def test_once_the_process_exits_only_the_exiting_thread_runs_the_model() -> None:
    """After the exit hook another thread's model run is refused with ExitingError; the exiting
    thread's own (an atexit handler's) still runs (in a child process)."""
    code = textwrap.dedent(
        """
        import threading
        from sources.embedding import _inflight
        _inflight._at_exit()
        with _inflight.model_run():
            print("own run")
        def other():
            try:
                with _inflight.model_run():
                    pass
            except _inflight.ExitingError as exc:
                print(type(exc).__name__)
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        """
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert (ran.returncode, ran.stdout) == (0, "own run\nExitingError\n")


def test_a_forked_child_starts_with_no_run_in_flight() -> None:
    """A child forked while its parent's thread is inside a model run exits at once, not after
    waiting for a run it does not have."""
    code = textwrap.dedent(
        """
        import os, threading
        from sources.embedding import _inflight
        inside, release = threading.Event(), threading.Event()
        def run():
            with _inflight.model_run():
                inside.set()
                release.wait(30)
        threading.Thread(target=run, daemon=True).start()
        inside.wait(30)
        pid = os.fork()
        if pid == 0:
            print("idle" if _inflight.wait_idle(0.0) else "busy", flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        release.set()
        """
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert (ran.returncode, ran.stdout) == (0, "idle\n")
