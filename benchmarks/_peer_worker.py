"""One system of the peers benchmark in its own process: build, then answer blocks of tasks.

    python -m benchmarks._peer_worker SYSTEM WORKDIR WARM_FROM WARM

`benchmarks._peers` starts it; it is not meant to be run by hand. The protocol is JSON
lines on the process's original stdout (anything a library prints goes to stderr):
after its build the worker writes {"ready": ...}; for each {"block": [task indices]} line
on stdin it writes {"block": {"ms": [...], "results": [...], "cpu_s": ..., "wall_s": ...}};
at {"quit": true} it writes {"done": ...} and exits.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import structlog

from . import _measure
from ._peer_systems import Corpus, make

if TYPE_CHECKING:
    from ._peer_systems import System


async def _block(system: System, indices: list[int]) -> dict[str, Any]:
    """Time each call; CPU time over wall time says how many cores a call keeps busy."""
    ms: list[float] = []
    results: list[int] = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in indices:
        started = time.perf_counter()
        results.append(await system.call(i))
        ms.append(1000 * (time.perf_counter() - started))
    return {
        "ms": ms,
        "results": results,
        "cpu_s": time.process_time() - cpu0,
        "wall_s": time.perf_counter() - wall0,
    }


async def serve(name: str, workdir: Path, warm: range, proto: IO[str]) -> None:
    def send(msg: dict[str, Any]) -> None:
        proto.write(json.dumps(msg) + "\n")
        proto.flush()

    corpus = Corpus.read(workdir)
    async with contextlib.AsyncExitStack() as stack:
        system = make(name, corpus, workdir)
        rss_before = _measure.rss_mb()
        build = await system.start(stack)
        rss_built = _measure.rss_mb()
        warm_ms = (await _block(system, list(warm)))["ms"]  # caches, lazily loaded matrices, first query
        send(
            {
                "ready": {
                    "build": build,
                    "first_call_ms": round(warm_ms[0], 3) if warm_ms else None,
                    "rss_before_build_mb": rss_before,
                    "rss_after_build_mb": rss_built,
                    "rss_ready_mb": _measure.rss_mb(),
                    "peak_rss_ready_mb": _measure.peak_rss_mb(),
                    "pid": os.getpid(),
                }
            }
        )
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            msg = json.loads(line)
            if msg.get("quit"):
                break
            send({"block": await _block(system, msg["block"])})
        send(
            {
                "done": {
                    "rss_end_mb": _measure.rss_mb(),
                    "peak_rss_mb": _measure.peak_rss_mb(),
                    "disk_bytes": system.disk_bytes(),
                }
            }
        )


def main(argv: list[str]) -> int:
    name, workdir, warm_from, warm = argv[0], Path(argv[1]), int(argv[2]), int(argv[3])
    # The protocol keeps the original stdout; whatever a library prints goes to stderr.
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # A host, like `python -m benchmarks`: warnings and errors only, to stderr.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    anyio.run(serve, name, workdir, range(warm_from, warm_from + warm), proto)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
