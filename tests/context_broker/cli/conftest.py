"""The CLI run in-process: the same `main` a subprocess runs, without paying its start-up on
every call."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import attrs
import pytest
import structlog

from context_broker._cli import main


@attrs.frozen
class Ran:
    """What one CLI invocation left: exit status, stdout, the non-empty lines of stderr."""

    status: int
    out: str
    err_lines: tuple[str, ...]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[..., Ran]]:
    """Run `context-broker ARGS...` in this process; structlog is restored afterwards."""
    saved = structlog.get_config()

    def run(*argv: str) -> Ran:
        capsys.readouterr()
        try:
            status = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            status = int(exc.code or 0)
        finally:
            structlog.configure(**saved)
        captured = capsys.readouterr()
        return Ran(status, captured.out, tuple(line for line in captured.err.splitlines() if line.strip()))

    yield run
    structlog.configure(**saved)
