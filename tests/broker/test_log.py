"""The library's loggers: the host's structlog when it configured one, else silent stdlib logging."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from broker.log import get_logger


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=True
    )


def test_events_go_through_the_hosts_structlog(trace_events):
    """A host that configured structlog (here: capture_logs) gets every event and field as before."""
    get_logger("broker.test").bind(turn_id="t1").debug("source.completed", source="store", candidates=3)
    assert trace_events[-1] == {
        "event": "source.completed",
        "log_level": "debug",
        "turn_id": "t1",
        "source": "store",
        "candidates": 3,
    }


def test_unconfigured_host_sees_nothing():
    """With no logging set up, events at every level print nothing on stdout or stderr."""
    done = _run(
        """
        from broker.log import get_logger
        import broker
        log = get_logger("broker._gather").bind(turn_id="t")
        for level in ("debug", "info", "warning", "error"):
            getattr(log, level)("source.failed", source="store")
        """
    )
    assert (done.stdout, done.stderr) == ("", "")


def test_stdlib_logging_host_gets_event_names_and_fields():
    """A host that configured only `logging` gets the event name as message and fields on the record."""
    done = _run(
        """
        import logging, sys
        logging.basicConfig(stream=sys.stdout, level=logging.DEBUG,
                            format="%(levelname)s %(name)s %(message)s %(source)s %(turn_id)s %(field_name)s")
        import broker
        from broker.log import get_logger
        get_logger("broker._gather").bind(turn_id="t9").debug("source.completed", source="store", name="n")
        """
    )
    assert done.stdout == "DEBUG broker._gather source.completed store t9 n\n"


def test_warnings_stay_silent_without_handlers():
    """The NullHandler keeps logging's last-resort handler from printing library warnings."""
    done = _run(
        """
        import sources
        from broker.log import get_logger
        get_logger("sources.storage._vectors").warning("store.vectors.no_ann", hint="x")
        """
    )
    assert done.stderr == ""
