"""Load: several writer and reader processes on one file for a fixed time.

Writers add notes, batches and memorules as fast as they can; readers run turns through the
default sources under the default deadline and circuit breakers, as an agent runtime would.
Every process is forked from one pre-imported parent, waits at a barrier, then runs for the
same fixed time. The outcome, not the timing, is asserted:

- 0 errors in any process (a write that raised, a turn that raised);
- 0 lost writes: every acknowledged write is in the file afterwards;
- the circuit breakers do not turn load into an outage: `store` answers (ok or empty) in at
  least 95 % of the turns, and no source is open-circuit in more than 5 % of them.

CI runs CI_SECONDS with 4 writers and 2 readers in the default (hybrid) mode; `--slow` runs
6 writers and 2 readers ten times longer, and in lexical mode too. The readers share two
cores with the writers, and the test asserts outcomes, not latencies.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from broker import Namespace
from broker.testing import background_memories
from sources import MemoryStore, NewEntry

ROOT = Path(__file__).resolve().parents[1]
NS = Namespace(tenant_id="load", project_id="p")
CI_SECONDS = 4.0
WRITERS = 4
SLOW_WRITERS = 6  # the load issue 18 was measured under
READERS = 2
MIN_STORE_ANSWERED = 0.95
MAX_OPEN_CIRCUIT = 0.05

PROCESSES = r"""
import json, logging, os, random, sys, time, traceback
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
from broker import Namespace, open_selector
from sources import MemoryStore, NewEntry, WriterSession, default_sources, remember

DB, OUT, SECONDS, WRITERS, READERS, MODE = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
NS = Namespace(tenant_id="load", project_id="p")
TASKS = (
    "when does the deploy freeze start after the payment incident",
    "which database did we pick for the billing service",
    "release train checklist for the mobile app",
    "what time is it",
    "who reviews pull requests with screenshots",
)
SYLLABLES = ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze", "bo", "da", "fi", "gu")


def text(rng, n):
    # Varied made-up words: a query matches a realistic share of what writers add.
    words = ("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(n))
    return " ".join(words)


def barrier(name):
    open(os.path.join(OUT, f"ready-{name}"), "w").close()
    while not os.path.exists(os.path.join(OUT, "go")):
        time.sleep(0.002)
    return time.monotonic() + SECONDS


def writer(name, seed):
    rng = random.Random(seed)
    store = MemoryStore.open(DB, mode=MODE)
    acks = open(os.path.join(OUT, f"acks-{name}"), "a", buffering=1)
    errors = []
    end, i = barrier(name), 0
    while time.monotonic() < end:
        i += 1
        try:
            op = rng.random()
            if op < 0.6:
                store.add_entry(text(rng, 12), id=f"{name}-n{i}", namespace=NS)
                acks.write(f"{name}-n{i}\n")
            elif op < 0.8:
                ids = [f"{name}-b{i}-{j}" for j in range(10)]
                store.add_entries([NewEntry(text=text(rng, 12), id=x) for x in ids], namespace=NS)
                acks.write("".join(x + "\n" for x in ids))
            else:
                remember(store, kind="memorule", namespace=NS, id=f"{name}-m{i}", memorule_kind="convention",
                         subject=f"Rule {i} " + text(rng, 2), body=text(rng, 12),
                         applies_to={"scope": "project"}, session=WriterSession(session_id=name, persona="load"))
                acks.write(f"{name}-m{i}\n")
        except Exception:
            errors.append(traceback.format_exc(limit=3))
    return {"writes": i, "errors": errors}


def reader(name, seed):
    import anyio
    rng = random.Random(seed)
    store = MemoryStore.open(DB, mode=MODE, create=False)
    statuses, errors, turns = {}, [], 0

    async def run():
        nonlocal turns
        async with open_selector(default_sources(store), mode=store.mode) as selector:
            end = barrier(name)
            while time.monotonic() < end:
                try:
                    result = await selector.select_for_task(rng.choice(TASKS), namespace=NS)
                except Exception:
                    errors.append(traceback.format_exc(limit=3))
                    continue
                turns += 1
                for o in result.sources:
                    key = f"{o.name}:{o.status}"
                    statuses[key] = statuses.get(key, 0) + 1

    anyio.run(run, backend="trio")
    return {"turns": turns, "statuses": statuses, "errors": errors}


children = {}
for k in range(WRITERS + READERS):
    role, name = (writer, f"w{k}") if k < WRITERS else (reader, f"r{k - WRITERS}")
    pid = os.fork()
    if pid == 0:
        try:
            report = role(name, k)
        except Exception:
            report = {"errors": [traceback.format_exc()]}
        with open(os.path.join(OUT, f"report-{name}.json"), "w") as f:
            json.dump(report, f)
        os._exit(0)
    children[pid] = name
while len([p for p in os.listdir(OUT) if p.startswith("ready-")]) < WRITERS + READERS:
    time.sleep(0.01)
open(os.path.join(OUT, "go"), "w").close()
for pid in children:
    os.waitpid(pid, 0)
"""


def _seed(db: Path, mode: str) -> None:
    """The bundled sample notes and a few on the readers' topics, written in the readers' mode."""
    texts = [
        *background_memories(),
        "Deploys freeze every Friday after the payment incident.",
        "We picked Postgres 16 for the billing service.",
        "The mobile app release train leaves every second Tuesday.",
        "Priya reviews pull requests that come with screenshots.",
    ]
    with MemoryStore.open(db, mode=mode) as store:
        store.add_entries([NewEntry(text=t) for t in texts], namespace=NS)


def _run(tmp_path: Path, seconds: float, mode: str, writers: int = WRITERS) -> list[dict[str, object]]:
    db, out = tmp_path / "load.db", tmp_path / "out"
    out.mkdir()
    _seed(db, mode)
    subprocess.run(
        [sys.executable, "-c", PROCESSES, str(db), str(out), str(seconds), str(writers), str(READERS), mode],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120 + 2 * seconds,
        check=True,
    )
    reports = {p.stem.removeprefix("report-"): json.loads(p.read_text()) for p in out.glob("report-*.json")}
    assert len(reports) == writers + READERS
    for name, report in reports.items():
        assert report["errors"] == [], f"{name}: {report['errors'][:3]}"
    acked = {line for p in out.glob("acks-*") for line in p.read_text().splitlines()}
    conn = sqlite3.connect(db)
    try:
        stored = {r[0] for r in conn.execute("SELECT id FROM entries")}
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    assert acked <= stored, f"{len(acked - stored)} acknowledged writes lost"
    assert len(acked) >= writers * seconds  # the writers really wrote
    return [r for name, r in reports.items() if name.startswith("r")]


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
@pytest.mark.parametrize("mode", ["hybrid", pytest.param("lexical", marks=pytest.mark.slow)])
def test_under_write_load_the_store_keeps_answering(tmp_path: Path, slow_factor: int, mode: str) -> None:
    """Writers and readers on one file: no error, no lost write, `store` answers >= 95 %."""
    writers = SLOW_WRITERS if slow_factor > 1 else WRITERS
    readers = _run(tmp_path, CI_SECONDS * slow_factor, mode, writers)
    statuses: Counter[str] = Counter()
    for r in readers:
        statuses.update(r["statuses"])  # type: ignore[arg-type]
    turns = sum(int(r["turns"]) for r in readers)  # type: ignore[call-overload]
    assert turns >= 20 * slow_factor
    answered = statuses["store:ok"] + statuses["store:empty"]
    assert answered / turns >= MIN_STORE_ANSWERED, (answered, turns, statuses)
    for name in {k.split(":")[0] for k in statuses}:
        assert statuses[f"{name}:open-circuit"] / turns <= MAX_OPEN_CIRCUIT, (name, statuses)
