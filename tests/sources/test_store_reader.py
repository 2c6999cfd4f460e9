"""Tests of a store's reads for its sources (`sources._store_reader`): the task's vector
embedded once and outside the read lane, the gate read once for the gated sources, an
embedder's failure."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import TYPE_CHECKING

import anyio
import attrs
import numpy as np
import pytest
import trio
import trio.testing

from broker import RECALL_MIN_SCORE, Candidate, Namespace, SourceAnswer
from broker.abc import Source, SourceRequest
from sources import MemoryStore
from sources._source_base import ReaderSource
from sources._store_reader import Gate, StoreReader
from sources.storage._engine import ReadStop

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    import numpy.typing as npt

    from sources.storage._engine import Reader


def lane_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the jobs every store's read lane runs from now on, in order."""
    reads: list[str] = []
    real = StoreReader._work

    def counted(self: StoreReader, fn: Callable[[Reader], object], stop: ReadStop) -> object:
        reads.append(getattr(fn, "func", fn).__qualname__)
        return real(self, fn, stop)  # type: ignore[arg-type]

    monkeypatch.setattr(StoreReader, "_work", counted)
    return reads


class CountingEmbedder:
    """A slow fake embedder that counts its calls."""

    model_id = "fake"
    dim = 2

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return ones, slowly."""
        self.calls += 1
        time.sleep(0.05)
        return np.ones((len(texts), 2), dtype=np.float32)


async def test_concurrent_sources_embed_one_task_once(tmp_path: Path) -> None:
    """Sources asking for the same task's vector at once share one embedding."""
    fake = CountingEmbedder()
    with MemoryStore.open(tmp_path / "e.db", mode="lexical", embedder=fake) as store:
        reader = StoreReader(store=store)
        cache = reader.embedder
        assert cache is not None
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(anyio.to_thread.run_sync, cache.embed, ["the task"])
        assert fake.calls == 1


class BatchRecordingEmbedder:
    """A fake embedder that records each batch it embeds; a text's vector is (len, 1)."""

    model_id = "fake"
    dim = 2

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Record the batch; each text's vector is (its length, 1)."""
        self.batches.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_a_turns_small_batches_embed_each_text_once(tmp_path: Path) -> None:
    """Texts a turn scores are remembered one by one: a later batch embeds only the new ones, and
    every row is the text's own vector, in the order asked; a large batch is not remembered."""
    fake = BatchRecordingEmbedder()
    with MemoryStore.open(tmp_path / "e.db", mode="lexical", embedder=fake) as store:
        cache = StoreReader(store=store).embedder
        assert cache is not None
        first = cache.embed(["ana", "ledger service"])
        again = cache.embed(["ledger service", "bo", "ana"])
        big = [f"text {i}" for i in range(40)]
        cache.embed(big)
        cache.embed(big)
        cache.embed(["solo"])  # a query's vector serves a later batch too
        mixed = cache.embed(["solo", "new"])
    assert fake.batches == [["ana", "ledger service"], ["bo"], big, big, ["solo"], ["new"]]
    np.testing.assert_allclose(mixed, _unit_rows(["solo", "new"]), rtol=1e-6)
    np.testing.assert_allclose(first, _unit_rows(["ana", "ledger service"]), rtol=1e-6)
    np.testing.assert_allclose(again, _unit_rows(["ledger service", "bo", "ana"]), rtol=1e-6)


def _unit_rows(texts: list[str]) -> npt.NDArray[np.float64]:
    """The fake's vectors of `texts` as the store checks them: unit length."""
    rows = np.array([[len(t), 1.0] for t in texts])
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


class TaskRecordingEmbedder(CountingEmbedder):
    """A CountingEmbedder that records the thread of each single-text (query) call."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[tuple[str, str]] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Record a query and its thread, then embed as CountingEmbedder does."""
        if len(texts) == 1:
            self.queries.append((texts[0], threading.current_thread().name))
        return super().embed(texts)


async def test_a_dense_turns_sources_embed_the_task_once_outside_the_read_lane(tmp_path: Path) -> None:
    """Hybrid sources fetching together embed their task once, in a worker thread that is not the lane's; a task of stop words is never embedded."""
    fake = TaskRecordingEmbedder()
    with MemoryStore.open(tmp_path / "e.db", mode="hybrid", embedder=fake) as store:
        reader = StoreReader(store=store, results=None)
        sources = [_Empty(reader) for _ in range(4)]
        request = SourceRequest(task="which database did we pick", namespace=Namespace(tenant_id="t"))
        async with anyio.create_task_group() as tg:
            for source in sources:
                tg.start_soon(source.fetch, request)
        await sources[0].fetch(attrs.evolve(request, task="what is it"))
    assert [task for task, _ in fake.queries] == [request.task]
    thread = fake.queries[0][1]
    assert thread != threading.main_thread().name
    assert not thread.startswith("context-broker-read")


class LexicalWaitingEmbedder:
    """A fake embedder whose query call waits (up to 5 s) for the store's lexical retrieval of
    that query, and records whether it came."""

    model_id = "fake"
    dim = 2

    def __init__(self, query: str) -> None:
        self.query = query
        self.retrieved: list[str] = []
        self.lexical_done = threading.Event()
        self.saw_lexical: list[bool] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return ones; a query first waits for its lexical retrieval."""
        if list(texts) == [self.query]:
            self.saw_lexical.append(self.lexical_done.wait(5.0))
        return np.ones((len(texts), 2), dtype=np.float32)


async def test_a_hybrid_turns_lexical_retrieval_runs_while_its_task_is_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hybrid turn retrieves its task's lexical matches in the lane while the task is embedded, and its reference reuses them: one retrieval a turn."""
    from sources.relevance._reference import lexical_hits  # noqa: PLC0415 - the retrieval counted

    task = "which database did we pick"
    fake = LexicalWaitingEmbedder(task)

    def counted(*args: object, **kwargs: object) -> object:
        found = lexical_hits(*args, **kwargs)  # type: ignore[arg-type]
        fake.retrieved.append(threading.current_thread().name)
        fake.lexical_done.set()
        return found

    for where in ("sources._store.lexical_hits", "sources.relevance._reference.lexical_hits"):
        monkeypatch.setattr(where, counted)
    ns = Namespace(tenant_id="t")
    with MemoryStore.open(tmp_path / "e.db", mode="hybrid", embedder=fake) as store:
        store.add_entry("we picked sqlite as the database", namespace=ns)
        reader = StoreReader(store=store, results=None)
        sources = [_Scoring(reader) for _ in range(3)]
        request = SourceRequest(task=task, namespace=ns, mode="hybrid")
        async with anyio.create_task_group() as tg:
            for source in sources:
                tg.start_soon(source.fetch, request)
    assert fake.saw_lexical == [True]
    assert len(fake.retrieved) == 1
    assert fake.retrieved[0].startswith("context-broker-read")


class _Scoring(ReaderSource):
    """Builds the task's scorer (and so the namespace's reference), returns nothing."""

    name = "scoring"

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        self._reader.scorer(conn, conn.namespace_id(request.namespace), request.task, request.mode)
        return []


class _Empty(ReaderSource):
    name = "empty"

    def _fetch_on(self, conn: sqlite3.Connection, *, request: SourceRequest) -> list[Candidate]:  # noqa: ARG002
        return []


async def test_open_warms_every_matrix_so_no_turn_loads_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the selector loads every corpus matrix of every namespace; a turn loads none."""
    from broker import open_selector  # noqa: PLC0415 - composition-root imports, test only
    from sources import FactWriter, NewEntry, NewFact, default_sources  # noqa: PLC0415
    from sources.embedding._embedder import load_default_embedder  # noqa: PLC0415
    from sources.storage import _vectors  # noqa: PLC0415

    loads: list[tuple[int, int]] = []
    real_load = _vectors.VectorIndex._load

    def counting(
        self: _vectors.VectorIndex, conn: sqlite3.Connection, ns_id: int, corpus: int, tomb: int
    ) -> object:
        loads.append((ns_id, corpus))
        return real_load(self, conn, ns_id, corpus, tomb)

    monkeypatch.setattr(_vectors.VectorIndex, "_load", counting)
    with MemoryStore.open(tmp_path / "h.db", embedder=load_default_embedder()) as store:
        for tenant in ("a", "b"):
            ns = Namespace(tenant_id=tenant)
            store.add_entries([NewEntry(text=f"The {tenant} team deploys on Fridays.")], namespace=ns)
            FactWriter(store).add_facts([NewFact(text=f"{tenant} uses Postgres 16.")], namespace=ns)
        async with open_selector(default_sources(store), deadline=30.0, mode="hybrid") as selector:
            assert sorted(loads) == [(ns, c) for ns in (1, 2) for c in (0, 1, 2)]
            loads.clear()
            result = await selector.select_for_task(
                "When does the team deploy?", namespace=Namespace(tenant_id="a")
            )
        assert loads == []
        assert {str(s.status) for s in result.sources} <= {"ok", "empty"}


ALICE = Namespace(tenant_id="alice")  # the background_store fixture's tenant


_GATE_TASKS = (
    "prepare the Lighthouse 2.4 release notes",
    "who is on call for Lighthouse this week",
    "what time is it",
    "bake a sourdough loaf with rye flour",
)


async def _answers(
    store: MemoryStore, task: str, *, result_cache: int = 0, turns: int = 1, mode: str | None = "lexical"
) -> dict[str, list[tuple[str, float]]]:
    """Every default source's answer to `task` in alice's namespace, fetched together, in each
    of `turns` turns (the last turn's answers); `mode` None leaves it to the store."""
    from sources import default_sources  # noqa: PLC0415 - the composition under test

    sources = default_sources(store, result_cache=result_cache)
    for source in sources:
        await source.open()
    out: dict[str, list[tuple[str, float]]] = {}
    for _ in range(turns - 1):
        await _turn(sources, task, out, mode)
    await _turn(sources, task, out, mode)
    return out


async def _turn(
    sources: list[Source], task: str, out: dict[str, list[tuple[str, float]]], mode: str | None
) -> None:
    request = SourceRequest(task=task, namespace=ALICE, mode=mode)  # one a turn, as a selector's

    async def one(source: Source) -> None:
        found = await source.fetch(request)
        out[source.name] = [(c.entry_id, c.score) for c in found]

    async with anyio.create_task_group() as tg:
        for source in sources:
            tg.start_soon(one, source)


async def test_sources_answer_the_same_whether_or_not_they_ask_the_gate_first(
    background_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the task's gate once for the gated sources changes no source's answer, for tasks whose gate opens and tasks whose gate stays closed."""
    with background_store.engine.read() as conn:
        ns_id = conn.namespace_id(ALICE)
        gates = [background_store.scorer_on(conn, ns_id, t, mode="lexical").qpp for t in _GATE_TASKS]
    assert min(gates) < RECALL_MIN_SCORE <= max(gates), gates  # both kinds are tried
    gated = [await _answers(background_store, t) for t in _GATE_TASKS]
    assert any(any(found.values()) for found in gated)
    monkeypatch.setattr(StoreReader, "gated", _unknown_gate)
    assert [await _answers(background_store, t) for t in _GATE_TASKS] == gated


async def _unknown_gate(
    self: StoreReader,
    request: SourceRequest,
    read: Callable[[Reader], object],
    wants: Callable[[Gate], bool],
) -> tuple[Gate | None, None]:
    return None, None


@pytest.mark.parametrize("mode", ["lexical", None])
async def test_a_closed_gate_costs_the_gated_sources_one_read_between_them(
    background_store: MemoryStore, monkeypatch: pytest.MonkeyPatch, mode: str | None
) -> None:
    """On a task whose gate stays closed, the six gated sources answer nothing after one read between them, also when the request leaves the mode to the store; memorules (tenant-wide) and past_tasks (on its own evidence) read on their own."""
    reads = lane_reads(monkeypatch)
    found = await _answers(background_store, "bake a sourdough loaf with rye flour", mode=mode)
    assert len(found) == 8
    assert not any(found.values())
    turn = [r for r in reads if r != "ping"]  # the sources' opens ping the store first
    assert len(turn) == 3, turn


async def test_a_closed_gate_on_a_task_naming_a_graph_node_lets_the_graph_read_in_the_same_trip(
    background_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the gate stays closed but the task names a graph node, the graph source reads on its own evidence within the gated sources' one read and serves the fact the task asks about; the other gated sources still answer nothing."""
    from sources import GraphWriter  # noqa: PLC0415 - the composition under test

    graph = GraphWriter(background_store)
    graph.add_node("Ana", namespace=ALICE, id="ana")
    graph.add_node("Ledger", namespace=ALICE, id="ledger")
    graph.add_edge("ana", "maintains", "ledger", namespace=ALICE)
    task = "Who maintains Ledger?"
    with background_store.engine.read() as conn:
        gate = background_store.scorer_on(conn, conn.namespace_id(ALICE), task, mode="lexical").qpp
    assert gate < RECALL_MIN_SCORE
    reads = lane_reads(monkeypatch)
    found = await _answers(background_store, task)
    assert [entry for entry, _ in found.pop("graphs")] == ["graph:ana"]
    assert not any(found.values())
    turn = [r for r in reads if r != "ping"]
    assert len(turn) == 3, turn


async def test_an_open_gate_costs_the_gated_sources_one_read_between_them(
    background_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a task whose gate opens, the six gated sources read in one trip through the read lane between them (the gate's read, with theirs joined), and still answer."""
    reads = lane_reads(monkeypatch)
    found = await _answers(background_store, "prepare the Lighthouse 2.4 release notes")
    assert found["store"]  # the gate opened
    turn = [r for r in reads if r != "ping"]
    assert len(turn) == 3, turn


async def test_a_joined_sources_failing_read_fails_that_source_alone(
    background_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gated source whose read fails inside the turn's shared gate read raises its own error; the source that queued the read and the other joined ones answer as before."""
    from sources import default_sources  # noqa: PLC0415 - the composition under test

    task = "prepare the Lighthouse 2.4 release notes"
    want = await _answers(background_store, task)
    sources = {s.name: s for s in default_sources(background_store, result_cache=0)}
    for source in sources.values():
        await source.open()
    broken = sources["abstraction"]

    def fail(self: ReaderSource, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        raise RuntimeError("abstraction read failed")

    monkeypatch.setattr(type(broken), "_answer", fail)  # its class alone: the others read
    request = SourceRequest(task=task, namespace=ALICE, mode="lexical")
    got: dict[str, object] = {}

    async def one(source: Source) -> None:
        try:
            got[source.name] = [(c.entry_id, c.score) for c in await source.fetch(request)]
        except RuntimeError as exc:
            got[source.name] = str(exc)

    async with anyio.create_task_group() as tg:
        for source in sources.values():
            tg.start_soon(one, source)
    assert got.pop("abstraction") == "abstraction read failed"
    del want["abstraction"]
    assert got == want


async def test_a_closed_gates_empty_answers_are_kept_like_any_other(
    background_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers given on a closed gate without a read are kept at the store's change stamp: the same task asked again on an unchanged store reads nothing (an engine without a change stamp, PostgreSQL, reads the gate and the ungated sources' kept answers again)."""
    reads = lane_reads(monkeypatch)
    found = await _answers(background_store, "bake a sourdough loaf with rye flour", result_cache=64, turns=2)
    assert not any(found.values())
    again = 0 if background_store.engine.change_stamp(wait=True) is not None else 3
    turns = [r for r in reads if r != "ping"]
    assert len(turns) == 3 + again, turns  # the first turn's three reads, then the second's


async def _fetched(sources: Sequence[Source], task: str) -> dict[str, Sequence[Candidate]]:
    """Every source's answer to `task` in alice's namespace, asked together as one turn."""
    request = SourceRequest(task=task, namespace=ALICE, mode="lexical")
    answers: dict[str, Sequence[Candidate]] = {}

    async def one(source: Source) -> None:
        answers[source.name] = await source.fetch(request)

    async with anyio.create_task_group() as tg:
        for source in sources:
            tg.start_soon(one, source)
    return answers


async def test_a_closed_gates_sources_report_the_memories_the_turn_considered(
    background_store: MemoryStore,
) -> None:
    """On a closed gate every gated source answers no candidate but one shared set of the memories the turn's retrieval weighed (the trace's count), on the turn a kept answer serves too."""
    from sources import default_sources  # noqa: PLC0415 - the composition under test

    sources = default_sources(background_store, result_cache=64)
    for source in sources:
        await source.open()
    for _ in range(2):  # the second turn is served from the kept answers
        answers = await _fetched(sources, "what time is it")
        gated = [answers[s.name] for s in sources if isinstance(s, ReaderSource) and s.gated]
        assert len(gated) == 6
        assert all(isinstance(a, SourceAnswer) and a == [] for a in gated)
        assert len({a.considered for a in gated if isinstance(a, SourceAnswer)}) == 1
        assert isinstance(gated[0], SourceAnswer)
        assert gated[0].considered  # "time" matches notes of the namespace, under the floor


async def test_a_later_turns_source_never_waits_on_an_earlier_turns_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source of a later turn, asked after a commit while an earlier turn's gate read of the same task is still running, reads on its own and sees the commit."""
    from sources import default_sources  # noqa: PLC0415 - the composition under test

    ns = Namespace(tenant_id="t")
    task = "which database did we pick for the ledger"
    entered, go = threading.Event(), threading.Event()
    real = StoreReader._read_and_gate

    def held(
        self: StoreReader,
        read: Callable[[Reader], object],
        request: SourceRequest,
        riders: Sequence[object],
        conn: Reader,
    ) -> object:
        conn.namespace_id(request.namespace)  # the read's snapshot, taken before the commit
        entered.set()
        go.wait(5.0)
        return real(self, read, request, riders, conn)  # type: ignore[arg-type]

    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        for text in ("The team deploys on Fridays.", "Tomasz is learning Rust."):
            store.add_entry(text, namespace=ns)
        by_name = {s.name: s for s in default_sources(store, result_cache=0)}
        earlier, later = by_name["store"], by_name["persona"]
        for source in (earlier, later):
            await source.open()
        monkeypatch.setattr(StoreReader, "_read_and_gate", held)
        found: dict[str, Sequence[Candidate]] = {}

        async def ask(source: ReaderSource) -> None:
            found[source.name] = await source.fetch(SourceRequest(task=task, namespace=ns, mode="lexical"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, earlier)
            assert await anyio.to_thread.run_sync(entered.wait, 5.0)
            store.add_entry("We picked SQLite as the database for the ledger service.", namespace=ns)
            tg.start_soon(ask, later)
            await trio.testing.wait_all_tasks_blocked()
            go.set()
    assert found["store"] == []  # its snapshot is older than the commit
    assert [c.text for c in found["persona"]] == ["We picked SQLite as the database for the ledger service."]


class FailingEmbedder:
    """A fake embedder that fails on one query (and embeds anything else as ones)."""

    model_id = "failing"
    dim = 2

    def __init__(self, query: str) -> None:
        self.query = query

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Raise on the query."""
        if list(texts) == [self.query]:
            raise ValueError("the model failed")
        return np.ones((len(texts), 2), dtype=np.float32)


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
async def test_a_failing_embedder_reaches_the_source_as_raised(tmp_path: Path, mode: str) -> None:
    """The model's error in a dense or hybrid turn comes out of `fetch` as itself, not wrapped in an ExceptionGroup, so a trace and a breaker see what failed."""
    ns = Namespace(tenant_id="t")
    task = "which database did we pick"
    with MemoryStore.open(tmp_path / "f.db", mode=mode, embedder=FailingEmbedder(task)) as store:
        store.add_entry("we picked sqlite as the database", namespace=ns)
        source = _Scoring(StoreReader(store=store, results=None))
        with pytest.raises(ValueError, match="the model failed"):
            await source.fetch(SourceRequest(task=task, namespace=ns, mode=mode))
