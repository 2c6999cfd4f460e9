"""One agent process of `benchmarks.many_agents`: its own tenant, writing and running turns.

    python -m benchmarks._agent CONFIG_JSON

Opens the store the config names through the public API (`sources.open_store`, lexical), says
`ready` on stdout, waits for a line on stdin (so every agent starts at once), then for the
configured seconds alternates a write (a note each round, a memorule every `memorule_every`
rounds: `remember`) with a turn through the broker (`MemorySelector.explain`: the selection and
every candidate the sources returned) and, every `recall_every` rounds, a `recall`. Every text
it writes ends with its owner's mark (`[owner TENANT]`), so a row of another tenant read back
anywhere is seen. Prints one JSON report line at the end.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any, Final

import anyio
import attrs
import structlog

from broker import Namespace, SourceStatus, TurnRequest, open_selector
from sources import MemoryStore, WriterSession, default_sources, open_store, remember

from . import _procs, _synthetic

OWNER: Final = re.compile(r"\[owner ([^\]]+)\]")
_COMPLETE: Final = frozenset((SourceStatus.OK, SourceStatus.EMPTY))
MAX_ERRORS: Final = 20
"""Error texts kept in a report (all are counted)."""


def mark(text: str, tenant: str) -> str:
    """`text` with its owner's mark."""
    return f"{text} [owner {tenant}]"


def foreign(text: str, tenant: str) -> bool:
    """True when `text` does not carry exactly its reader's mark: another tenant's row."""
    return set(OWNER.findall(text)) != {tenant}


@attrs.frozen(kw_only=True)
class AgentConfig:
    """What one agent does: where, as whom, for how long."""

    target: str
    tenant: str
    project: str
    seconds: float
    seed: int
    deadline: float = 0.1
    memorule_every: int = 10
    recall_every: int = 5

    @property
    def namespace(self) -> Namespace:
        return Namespace(tenant_id=self.tenant, project_id=self.project)


@attrs.define(eq=False)
class Tally:
    """What the agent saw: the report's counters, filled as it runs."""

    acked: list[str] = attrs.field(factory=list)
    turn_ms: list[float] = attrs.field(factory=list)
    complete_turns: int = 0
    statuses: dict[str, int] = attrs.field(factory=dict)
    candidates: int = 0
    recalls: int = 0
    recalled: int = 0
    foreign: list[str] = attrs.field(factory=list)
    errors: list[str] = attrs.field(factory=list)
    error_count: int = 0

    def error(self, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(text)

    def check(self, where: str, text: str, tenant: str) -> None:
        if foreign(text, tenant):
            self.foreign.append(f"{where}: {text[-60:]}")

    def report(self, cfg: AgentConfig, seconds: float) -> dict[str, Any]:
        return {
            "tenant": cfg.tenant,
            "seconds": round(seconds, 3),
            "acked": self.acked,
            "turns": len(self.turn_ms),
            "complete_turns": self.complete_turns,
            "turn_ms": [round(ms, 3) for ms in self.turn_ms],
            "statuses": self.statuses,
            "candidates": self.candidates,
            "recalls": self.recalls,
            "recalled": self.recalled,
            "foreign": len(self.foreign),
            "foreign_examples": self.foreign[:MAX_ERRORS],
            "errors": self.error_count,
            "error_examples": self.errors,
        }


@attrs.define(eq=False)
class Agent:
    """One agent's loop over its store and selector."""

    cfg: AgentConfig
    store: MemoryStore
    gen: _synthetic.Generator
    tally: Tally = attrs.field(factory=Tally)
    _written: list[str] = attrs.field(factory=list)

    async def write(self, i: int) -> None:
        """A note, and every `memorule_every` rounds a memorule; acknowledged once returned."""
        text = mark(self.gen.memory(), self.cfg.tenant)
        entry_id = f"{self.cfg.tenant}-n{i}"
        await anyio.to_thread.run_sync(
            lambda: self.store.add_entry(text, namespace=self.cfg.namespace, id=entry_id)
        )
        self.tally.acked.append(entry_id)
        self._written.append(text)
        if i % self.cfg.memorule_every == 0:
            rule_id = f"{self.cfg.tenant}-m{i}"
            await anyio.to_thread.run_sync(lambda: self._memorule(rule_id))
            self.tally.acked.append(rule_id)

    def _memorule(self, rule_id: str) -> None:
        remember(
            self.store,
            kind="memorule",
            namespace=self.cfg.namespace,
            id=rule_id,
            memorule_kind="convention",
            subject=f"Rule {rule_id}",
            body=mark(self.gen.memory(), self.cfg.tenant),
            applies_to={"scope": "project"},
            session=WriterSession(session_id=self.cfg.tenant, persona="many-agents"),
        )

    def task(self, i: int) -> str:
        """Half the tasks from a text this agent wrote, half from a held-aside one: the words are
        every agent's (one vocabulary), so a broken wall would surface other tenants' rows."""
        source = (
            self._written[-1 - self.gen.below(min(len(self._written), 50))] if i % 2 else self.gen.memory()
        )
        return self.gen.task(OWNER.sub("", source))

    async def turn(self, selector: Any, task: str) -> None:  # noqa: ANN401 - a MemorySelector
        """One turn through the broker; every candidate the sources returned is checked."""
        request = TurnRequest(
            task=task,
            namespace=self.cfg.namespace,
            deadline=anyio.current_time() + self.cfg.deadline,
            mode="lexical",
        )
        started = time.perf_counter()
        result, fates = await selector.explain(request)
        self.tally.turn_ms.append(1000 * (time.perf_counter() - started))
        statuses = [o.status for o in result.sources]
        self.tally.complete_turns += all(s in _COMPLETE for s in statuses)
        for o in result.sources:
            key = f"{o.name}:{o.status}"
            self.tally.statuses[key] = self.tally.statuses.get(key, 0) + 1
            if o.status == SourceStatus.FAILED:
                self.tally.error(f"source {o.name} failed: {o.error}")
        for fate in fates:
            self.tally.candidates += 1
            self.tally.check(f"candidate {fate.candidate.source}", fate.candidate.text, self.cfg.tenant)

    async def recall(self, task: str) -> None:
        """Read back through `recall` (no floor): every memory it returns is checked."""
        found = await anyio.to_thread.run_sync(
            lambda: self.store.recall(
                task, namespace=self.cfg.namespace, mode="lexical", min_score=0.0, limit=20
            )
        )
        self.tally.recalls += 1
        self.tally.recalled += len(found)
        for r in found:
            self.tally.check("recall", r.memory.text, self.cfg.tenant)

    async def round(self, selector: Any, i: int) -> None:  # noqa: ANN401 - a MemorySelector
        """One write, one turn and (every few rounds) one recall; an exception is counted."""
        for step in ("write", "turn", "recall"):
            if step == "recall" and i % self.cfg.recall_every:
                continue
            try:
                if step == "write":
                    await self.write(i)
                elif step == "turn":
                    await self.turn(selector, self.task(i))
                else:
                    await self.recall(self.task(i))
            except Exception as exc:  # noqa: BLE001 - every failure is a finding, reported
                self.tally.error(f"{step}: {exc!r}")


async def run(cfg: AgentConfig) -> dict[str, Any]:
    """Open, wait for the go, run the rounds for `cfg.seconds`, report."""
    store = await anyio.to_thread.run_sync(lambda: open_store(cfg.target, mode="lexical"))
    agent = Agent(cfg=cfg, store=store, gen=_synthetic.Generator(seed=cfg.seed))
    try:
        async with open_selector(default_sources(store), mode="lexical", deadline=cfg.deadline) as selector:
            await anyio.to_thread.run_sync(_procs.wait_for_go)
            started = time.perf_counter()
            end, i = time.monotonic() + cfg.seconds, 0
            while time.monotonic() < end:
                i += 1
                await agent.round(selector, i)
            elapsed = time.perf_counter() - started
    finally:
        store.close()
    return agent.tally.report(cfg, elapsed)


def main(argv: list[str]) -> int:
    # A host: the library's own warnings (a failed source is in the report) stay quiet.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    cfg = AgentConfig(**json.loads(argv[0]))
    report = anyio.run(run, cfg, backend="trio")
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
