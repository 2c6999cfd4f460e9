"""Progress of a long write on stderr: a live bar on a terminal, a few plain lines otherwise.

On a terminal the bar is tqdm's (rate and time left, redrawn in place); tqdm is one
dependency-free module, where rich would bring two more packages for the same bar. Not on a
terminal (a log, CI), a redrawn bar would be noise, so one plain line is written at each tenth.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import TYPE_CHECKING, Never

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

_STEPS = 10


@contextlib.contextmanager
def progress(what: str, *, tty: bool | None = None) -> Iterator[Callable[[int, int], None]]:
    """A `progress(done, total)` callback for `what` ("ingest", "reindex"), closed on exit."""
    if sys.stderr.isatty() if tty is None else tty:
        with _bar(what) as update:
            yield update
    else:
        yield _Lines(what)


@contextlib.contextmanager
def _bar(what: str) -> Iterator[Callable[[int, int], None]]:
    from tqdm import tqdm  # noqa: PLC0415 - only a terminal needs it

    bars: list[tqdm[Never]] = []  # made at the first call, when the total is known

    def update(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(total=total, desc=what, unit=" lines", file=sys.stderr, dynamic_ncols=True))
        bars[0].update(done - bars[0].n)

    try:
        yield update
    finally:
        for bar in bars:
            bar.close()


class _Lines:
    """Plain lines: `ingest: 2000/20000 lines (10%), 640 lines/s, about 28 s left`."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._started = time.monotonic()
        self._next = 1

    def __call__(self, done: int, total: int) -> None:
        if total <= 0 or done * _STEPS < self._next * total:
            return
        self._next = done * _STEPS // total + 1
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = done / elapsed
        left = f", about {(total - done) / rate:.0f} s left" if done < total else ""
        sys.stderr.write(
            f"{self._what}: {done}/{total} lines ({100 * done // total}%), {rate:.0f} lines/s{left}\n"
        )
        sys.stderr.flush()
