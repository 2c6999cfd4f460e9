"""Answers kept across turns: a repeated query on an unchanged namespace is served from memory,
and any write to what the answer was read from — from any handle or process — invalidates it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from broker import Namespace, SessionContext
from broker.abc import SourceRequest
from broker.testing import background_memories
from sources import (
    MemorulesSource,
    MemoryStore,
    NewEntry,
    PastTaskSource,
    SqliteTaskRepository,
    StoreReader,
    StoreSource,
    WriterSession,
    default_sources,
    remember,
)
from sources._results import ResultCache
from sources.storage._sqlite._stamp import ChangeStamp

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from broker import Candidate

ROOT = Path(__file__).resolve().parents[2]
ALICE = Namespace(tenant_id="alice")
BOB = Namespace(tenant_id="bob")
FILLER = (
    "Bought groceries for the week: rice, beans and coffee.",
    "The train to Lyon was delayed by forty minutes.",
    "Planted tomatoes and basil on the balcony.",
    "Fixed the squeaky hinge on the kitchen cabinet.",
    "Booked a dentist appointment for next Thursday.",
)
TASK = "postgres vacuum cost limit"
POSTGRES = "The postgres vacuum runs nightly at two with a cost limit of 200."


def add_filler(store: MemoryStore, namespace: Namespace = ALICE) -> None:
    store.add_entries([NewEntry(text=t, id=f"f{i}") for i, t in enumerate(FILLER)], namespace=namespace)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as s:
        s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=ALICE)
        add_filler(s, BOB)
        s.add_entry(POSTGRES, namespace=ALICE, id="pg")
        yield s


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every query the store's recall runs, by query text."""
    seen: list[str] = []
    recall_on = MemoryStore.recall_on

    def counted(self: MemoryStore, conn: Any, query: str, **kw: Any) -> Any:
        seen.append(query)
        return recall_on(self, conn, query, **kw)

    monkeypatch.setattr(MemoryStore, "recall_on", counted)
    return seen


def ids(found: Sequence[Candidate]) -> list[str]:
    return [c.entry_id for c in found]


async def opened(store: MemoryStore, results: ResultCache | None = None) -> StoreSource:
    source = StoreSource(StoreReader(store=store, results=results or ResultCache()), store=store)
    await source.open()
    return source


REQUEST = SourceRequest(task=TASK, namespace=ALICE)


async def test_a_repeated_query_is_answered_without_running_the_store(
    store: MemoryStore, calls: list[str]
) -> None:
    """The second identical request runs no query: the cache answers it, with the same candidates."""
    source = await opened(store)
    first = await source.fetch(REQUEST)
    second = await source.fetch(REQUEST)
    assert "pg" in ids(first)
    assert second == first
    assert calls == [TASK]


async def test_the_store_mode_and_an_unnamed_mode_share_an_answer(
    store: MemoryStore, calls: list[str]
) -> None:
    """A request that leaves the mode to the store and one naming the store's mode are one query."""
    source = await opened(store)
    await source.fetch(REQUEST)
    await source.fetch(SourceRequest(task=TASK, namespace=ALICE, mode="lexical"))
    assert calls == [TASK]


async def test_another_request_field_is_another_answer(store: MemoryStore, calls: list[str]) -> None:
    """Types, limit and session context are part of the key: each is its own query."""
    source = await opened(store)
    for request in (
        REQUEST,
        SourceRequest(task=TASK, namespace=ALICE, types=("semantic",)),
        SourceRequest(task=TASK, namespace=ALICE, limit=3),
        SourceRequest(task=TASK, namespace=ALICE, context=SessionContext(persona="donna")),
    ):
        await source.fetch(request)
    assert len(calls) == 4


@pytest.mark.parametrize("write", ["add", "delete", "replace"])
async def test_a_write_to_the_namespace_invalidates(store: MemoryStore, calls: list[str], write: str) -> None:
    """An insert, a delete or a replacement in the namespace is seen by the very next turn."""
    source = await opened(store)
    assert "pg" in ids(await source.fetch(REQUEST))
    if write == "add":
        store.add_entry("Postgres vacuum tuning: raise the cost limit to 2000.", namespace=ALICE, id="pg2")
        expected = {"pg", "pg2"}
    elif write == "delete":
        store.delete("pg", namespace=ALICE)
        expected = set()
    else:
        store.add_entries([NewEntry(id="pg", text="Lunch was a sandwich.")], namespace=ALICE, replace=True)
        expected = set()
    assert set(ids(await source.fetch(REQUEST))) & {"pg", "pg2"} == expected
    assert len(calls) == 2


async def test_a_write_from_another_handle_invalidates(
    store: MemoryStore, calls: list[str], tmp_path: Path
) -> None:
    """A second store opened on the same file writes through its own connection: still seen."""
    source = await opened(store)
    await source.fetch(REQUEST)
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as other:
        other.delete("pg", namespace=ALICE)
    assert "pg" not in ids(await source.fetch(REQUEST))
    assert len(calls) == 2


async def test_a_write_from_another_process_invalidates(
    store: MemoryStore, calls: list[str], tmp_path: Path
) -> None:
    """Another process's write bumps the generation in the file itself (schema triggers)."""
    source = await opened(store)
    await source.fetch(REQUEST)
    script = (
        "import sys; from broker import Namespace; from sources import MemoryStore\n"
        "with MemoryStore.open(sys.argv[1], mode='lexical') as s:\n"
        "    s.add_entry('Postgres vacuum cost limit is 400 on the replicas.', namespace=Namespace(tenant_id='alice'), "
        "id='pg3')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "m.db")], check=True, timeout=60, env=env)
    assert "pg3" in ids(await source.fetch(REQUEST))
    assert len(calls) == 2


async def test_another_namespace_write_keeps_the_answer(store: MemoryStore, calls: list[str]) -> None:
    """A write to another tenant's namespace leaves this namespace's answers in place."""
    source = await opened(store)
    await source.fetch(REQUEST)
    store.add_entry("Postgres vacuum for bob's database.", namespace=BOB, id="b-pg")
    await source.fetch(REQUEST)
    assert calls == [TASK]


async def test_the_cache_keeps_only_the_most_recent_answers(store: MemoryStore, calls: list[str]) -> None:
    """The cache is bounded (LRU): an answer pushed out is computed again."""
    source = await opened(store, ResultCache(2))
    tasks = [TASK, "postgres cost limit", "vacuum schedule"]
    for task in [*tasks, tasks[0]]:
        await source.fetch(SourceRequest(task=task, namespace=ALICE))
    assert calls == [*tasks, tasks[0]]


async def test_a_tenant_wide_memorule_in_another_project_invalidates_memorules(store: MemoryStore) -> None:
    """Memorules read the tenant's other projects too, so their writes invalidate that source."""
    source = MemorulesSource(StoreReader(store=store))
    await source.open()
    request = SourceRequest(task="review the postgres vacuum cost limit", namespace=ALICE)
    assert await source.fetch(request) == []
    other = Namespace(tenant_id="alice", project_id="other")
    add_filler(store, other)
    remember(
        store,
        kind="memorule",
        namespace=other,
        memorule_kind="behavioral_rule",
        subject="Vacuum review",
        body="Review the postgres vacuum cost limit with the DBA before changing it.",
        applies_to={"scope": "global"},
        session=WriterSession(session_id="s-1", persona="donna"),
    )
    assert len(await source.fetch(request)) == 1


async def test_a_completed_task_invalidates_past_tasks(store: MemoryStore) -> None:
    """Past tasks read the task tables of the namespace, which bump its generation too."""
    source = PastTaskSource(StoreReader(store=store))
    await source.open()
    assert await source.fetch(REQUEST) == []
    repo = SqliteTaskRepository.from_store(store)
    repo.create_task(
        "Tune the postgres vacuum cost limit of the billing database", namespace=ALICE, task_id="t1"
    )
    repo.set_status("t1", "completed", namespace=ALICE)
    assert ids(await source.fetch(REQUEST)) == ["t1"]


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_cached_answers_equal_fresh_ones(tmp_path: Path, mode: str) -> None:
    """Every default source answers a repeated query exactly as a reader without a cache does."""
    with MemoryStore.open(tmp_path / "m.db", mode=mode) as s:
        s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=ALICE)
        cached, fresh = default_sources(s), default_sources(s, result_cache=0)
        for source in (*cached, *fresh):
            await source.open()
        for task in ("postgres database upgrade plan", "what did I plant on the balcony", "thanks"):
            request = SourceRequest(task=task, namespace=ALICE)
            for c, f in zip(cached, fresh, strict=True):
                first, again, uncached = (
                    await c.fetch(request),
                    await c.fetch(request),
                    await f.fetch(request),
                )
                assert first == again == uncached, c.name


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every worker-thread read the store's sources start."""
    started: list[int] = []
    run = StoreReader.run

    async def counted(self: StoreReader, fn: Any) -> Any:
        started.append(1)
        return await run(self, fn)

    monkeypatch.setattr(StoreReader, "run", counted)
    return started


async def test_a_repeat_with_nothing_committed_since_needs_no_worker_thread(
    store: MemoryStore, calls: list[str], threads: list[int]
) -> None:
    """While nothing is committed, a repeated request is answered in the event loop, the same candidates."""
    source = await opened(store)
    first = await source.fetch(REQUEST)
    started = len(threads)
    assert await source.fetch(REQUEST) == first
    assert await source.fetch(SourceRequest(task=TASK, namespace=ALICE, mode="lexical")) == first
    assert len(threads) == started
    assert calls == [TASK]


async def test_any_commit_sends_the_next_repeat_to_the_generations(
    store: MemoryStore, calls: list[str], threads: list[int], tmp_path: Path
) -> None:
    """A commit anywhere (another tenant, another handle) makes the repeat read the generation in a thread."""
    source = await opened(store)
    await source.fetch(REQUEST)
    store.add_entry("Postgres vacuum for bob's database.", namespace=BOB, id="b-pg")
    started = len(threads)
    await source.fetch(REQUEST)
    assert (len(threads), calls) == (started + 1, [TASK])  # the generation kept the answer
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as other:
        other.delete("pg", namespace=ALICE)
    assert "pg" not in ids(await source.fetch(REQUEST))
    assert (len(threads), len(calls)) == (started + 2, 2)


async def test_a_stamp_that_cannot_be_read_at_once_is_unknown(
    store: MemoryStore, threads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the change stamp is unreadable without waiting, the repeat takes the worker-thread path."""
    source = await opened(store)
    await source.fetch(REQUEST)
    monkeypatch.setattr(ChangeStamp, "read", lambda *_, **__: None)
    started = len(threads)
    await source.fetch(REQUEST)
    assert len(threads) == started + 1
