"""The injection corpus (tests/broker/injection_corpus.py) through `ContextBroker.assemble`.

Every payload is recalled as a memory — all of them from a FakeSource, a sample from a real
SQLite store through the default sources — and some as past conversation turns. For every
assembled context: each payload sits inside its own block, between the turn's nonce tags,
and no line outside the broker's own (nonce-marked) structure matches a structural pattern
after folding.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from injection_corpus import Payload, payloads, structural_problems

from broker import Context, Namespace, Turn, open_broker
from broker._render import CONTINUATION, active_task_header, broker_note, past_task_label, render_past_task
from broker._selector import open_selector
from broker.abc import ConversationTurn, TaskRecord
from broker.testing import FakeSource, background_memories, make_candidate
from sources import MemoryStore, NewEntry, SqliteTaskRepository, default_sources

REAL_CLOCK_DEADLINE = 30.0
"""A turn's deadline where a real repository reads in a thread: one no slow machine misses."""

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

NS = Namespace(tenant_id="acme", project_id="injection")
TASK = "Summarise what we know about the payment service deploy freeze"
T0 = "2026-01-02T03:04:05+00:00"
CORPUS = payloads()
_MARKER = re.compile(r"#p\d{4}")


def marker(payload: Payload) -> str:
    found = _MARKER.findall(payload.text)
    assert len(found) == 1
    return found[0]


def test_the_corpus_has_at_least_500_distinct_payloads_of_every_family():
    """The corpus the README reports: >= 500 distinct payloads, every family the issue names."""
    assert len({p.text for p in CORPUS}) == len(CORPUS) >= 500
    families = {p.family for p in CORPUS}
    assert families == {
        "tag forgery",
        "header forgery",
        "template marker",
        "MINJA bridging",
        "AgentPoison trigger",
        "invisible or bidi",
        "split instruction",
    }


def test_the_detector_sees_the_raw_forgeries():
    """Unneutralised, the forgeries do read as structure: the detector is not vacuous."""
    forged = [p for p in CORPUS if p.family in {"tag forgery", "header forgery", "template marker"}]
    flagged = [
        p for p in forged if any(structural_problems(line, "qzvxkwjrtplm") for line in p.text.splitlines())
    ]
    assert len(flagged) / len(forged) > 0.9


def nonce_of(ctx: Context) -> str:
    found = re.match(r"ACTIVE TASK \[([a-z]{12})\]", ctx.blocks[-1].text)
    assert found is not None
    return found.group(1)


def _history_content(lines: Sequence[str], nonce: str) -> Iterator[str]:
    """The recalled part of each line of a past-task block (its label stripped)."""
    reply = re.compile(rf"PAST REPLY \[{nonce}\] \([^)]*\): ")
    for line in lines:
        if line.startswith(f"{past_task_label(nonce)} "):
            yield line.removeprefix(f"{past_task_label(nonce)} ")
        elif reply.match(line):
            yield reply.sub("", line, count=1)
        else:
            assert line.startswith(CONTINUATION), line
            yield line.removeprefix(CONTINUATION)


def check_context(ctx: Context, expected: Sequence[Payload], description: str) -> None:
    """Every payload inside its own block; no content line structural; the nonce only in structure."""
    nonce = nonce_of(ctx)
    content: list[str] = []
    where: dict[str, list[int]] = {}
    for i, block in enumerate(ctx.blocks):
        head, *body, tail = block.text.split("\n")
        if block.kind == "memory":
            assert re.fullmatch(rf"<memory-{nonce} [^<>\n]+>", head), head
            assert tail == f"</memory-{nonce}>"
            content += body
        elif block.kind == "history":
            assert re.fullmatch(rf"<past-task-{nonce} [^<>\n]+>", head), head
            assert tail == f"</past-task-{nonce}>"
            content += _history_content(body, nonce)
        else:
            assert head == active_task_header(nonce)
            assert tail == broker_note(nonce)
            assert "\n".join(body) == f"{description}\n"
        for found in _MARKER.findall("\n".join(body)):
            where.setdefault(found, []).append(i)
    for p in expected:
        assert len(where.get(marker(p), [])) == 1, f"{marker(p)} must be in exactly one block"
    problems = [(line, structural_problems(line, nonce)) for line in content]
    assert [p for p in problems if p[1]] == []


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[SqliteTaskRepository]:
    store = MemoryStore.open(tmp_path / "tasks.db", mode="lexical")
    repo = SqliteTaskRepository.from_store(store)
    yield repo
    store.close()


def _batches() -> list[list[Payload]]:
    """Twenty payloads a turn; the parts of one split instruction always in the same turn."""
    single = [p for p in CORPUS if p.group is None]
    batches = [single[i : i + 20] for i in range(0, len(single), 20)]
    groups: dict[str, list[Payload]] = {}
    for p in CORPUS:
        if p.group is not None:
            groups.setdefault(p.group, []).append(p)
    return batches + list(groups.values())


async def test_every_payload_recalled_as_a_memory_stays_inside_its_block(repo):
    """The whole corpus through assemble: 100% stay in their block, no forged structure anywhere."""
    task_id = repo.create_task(TASK, namespace=NS)
    source = FakeSource("store")
    checked = 0
    async with (
        open_selector([source], deadline=REAL_CLOCK_DEADLINE) as selector,
        open_broker(selector=selector, tasks=repo, conversations=repo) as broker,
    ):
        for batch in _batches():
            source.candidates = tuple(
                make_candidate(
                    marker(p)[1:], 0.9, source="store", text=p.text, memory_type="episodic", created_at=T0
                )
                for p in batch
            )
            ctx = await broker.assemble(
                Turn(
                    task_id=task_id, namespace=NS, window=200_000, input_budget=200_000, memory_budget=100_000
                )
            )
            assert sum(b.kind == "memory" for b in ctx.blocks) == len(batch)
            check_context(ctx, batch, TASK)
            checked += len(batch)
    assert checked == len(CORPUS)


async def test_a_sample_stored_in_a_real_store_stays_inside_its_block(tmp_path):
    """Every tenth payload written to a SQLite store and recalled by the default sources."""
    store = MemoryStore.open(tmp_path / "memory.db", mode="lexical")
    tasks = SqliteTaskRepository.from_store(store)
    sample = CORPUS[::10]
    background = [NewEntry(text=t) for t in background_memories()]
    recalled = 0
    try:
        async with (
            open_selector(default_sources(store), deadline=REAL_CLOCK_DEADLINE, mode="lexical") as selector,
            open_broker(selector=selector, tasks=tasks, conversations=tasks) as broker,
        ):
            for i, p in enumerate(sample):
                ns = Namespace(tenant_id="acme", project_id=f"p{i}")
                store.add_entries(background, namespace=ns)
                entry_id = store.add_entry(
                    f"The payment service deploy freeze starts every Friday. {p.text}", namespace=ns
                )
                task_id = tasks.create_task(
                    "When does the payment service deploy freeze start?", namespace=ns
                )
                ctx = await broker.assemble(
                    Turn(task_id=task_id, namespace=ns, window=128_000, input_budget=8000)
                )
                recalled += entry_id in {b.entry_id for b in ctx.blocks}
                check_context(ctx, [], "When does the payment service deploy freeze start?")
    finally:
        store.close()
    assert recalled == len(sample)


def test_every_payload_as_a_past_turn_stays_inside_its_block():
    """Rendered as past user turns and replies, no payload line reads as structure."""
    nonce = "qzvxkwjrtplm"
    task = TaskRecord(
        task_id="t1", description="plan the release", status="completed", created_at=T0, updated_at=T0
    )
    for i in range(0, len(CORPUS), 10):
        turns = [
            ConversationTurn(task_id="t1", role="user" if j % 2 else "assistant", text=p.text, created_at=T0)
            for j, p in enumerate(CORPUS[i : i + 10])
        ]
        head, *body, tail = render_past_task(task, turns, nonce=nonce).split("\n")
        assert (head, tail) == (f"<past-task-{nonce} id=t1>", f"</past-task-{nonce}>")
        for line in _history_content(body, nonce):
            assert structural_problems(line, nonce) == [], line


async def test_hostile_past_turns_through_assemble_stay_inside_the_history_block(repo):
    """Stored past turns holding forgeries come back labelled, inside the past-task block."""
    hostile = [p for p in CORPUS if p.family in {"header forgery", "template marker"}][::8]
    repo.create_task("Rotate the staging certificates", namespace=NS, task_id="past")
    for j, p in enumerate(hostile):
        repo.append_turn("past", "user" if j % 2 else "assistant", p.text, namespace=NS)
    repo.set_status("past", "completed", namespace=NS)
    task_id = repo.create_task(TASK, namespace=NS)
    # The past-task source's verdict, faked: this past task cleared the floor for the turn.
    relevant = FakeSource("past_tasks", candidates=[make_candidate("past", 0.8, block="history")])
    async with (
        open_selector([relevant], deadline=REAL_CLOCK_DEADLINE) as selector,
        open_broker(selector=selector, tasks=repo, conversations=repo) as broker,
    ):
        ctx = await broker.assemble(Turn(task_id=task_id, namespace=NS, window=128_000, input_budget=100_000))
    assert [b.kind for b in ctx.blocks] == ["history", "task"]
    check_context(ctx, hostile, TASK)
