"""One writer process of the engines benchmark (`benchmarks._engines`).

    python -m benchmarks._writer CONFIG_JSON

Opens the store (`sources.open_store`, lexical: no embedding), says `ready`, waits for the
release (`_procs`), then for `seconds` writes one note at a time with `MemoryStore.add_entry`
into the benchmark's namespace, and prints one JSON report: writes acknowledged, the seconds
they took, each write's milliseconds (p50 / p99) and the errors.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from sources import open_store

from . import _procs, _synthetic
from ._measure import pct
from ._synthetic import NS


def run(cfg: dict[str, Any]) -> dict[str, Any]:
    """Write for `cfg["seconds"]` after the release; the report."""
    store = open_store(cfg["target"], mode="lexical")
    gen = _synthetic.Generator(seed=cfg["seed"])
    texts = [gen.memory() for _ in range(200)]  # drawn before the clock starts, reused in turn
    ms: list[float] = []
    errors: list[str] = []
    try:
        _procs.wait_for_go()
        started = time.perf_counter()
        end = started + cfg["seconds"]
        while time.perf_counter() < end:
            i = len(ms) + len(errors)
            begun = time.perf_counter()
            try:
                store.add_entry(f"{texts[i % len(texts)]} {i}", namespace=NS, id=f"{cfg['prefix']}-{i}")
            except Exception as exc:  # noqa: BLE001 - every failure is a finding, reported
                errors.append(repr(exc))
                continue
            ms.append(1000 * (time.perf_counter() - begun))
        elapsed = time.perf_counter() - started
    finally:
        store.close()
    return {
        "writes": len(ms),
        "seconds": elapsed,
        "write_ms": pct(ms),
        "errors": errors[:10],
        "error_count": len(errors),
    }


def main(argv: list[str]) -> int:
    print(json.dumps(run(json.loads(argv[0]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
