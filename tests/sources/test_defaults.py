"""Tests of the default wiring: eight sources in order, one limiter, the source floor, and
cross-source guarantees."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

import anyio
import attrs
import pytest

from broker import RECALL_MIN_SCORE, ConfigError, Namespace, open_selector
from broker.abc import Source, SourceRequest
from broker.testing import check_source_never_blocks
from sources import MemoryStore, NewEntry, SqliteTaskRepository, WriterSession, remember
from sources._defaults import DEFAULT_SOURCES, Writers, default_sources
from sources._neurons import NeuronSource
from sources._store_reader import StoreReader

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from broker import Candidate

NS = Namespace(tenant_id="conv-1", project_id="locomo")
OTHER = Namespace(tenant_id="conv-2", project_id="locomo")
TRIVIAL = [
    "what time is it",
    "what time is it?",
    "hi",
    "hello there",
    "hey, how are you?",
    "thanks!",
    "ok",
    "good morning",
    "what's 2 + 2",
    "tell me a joke",
    "can you hear me?",
    "never mind",
]
TURNS = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Wow, that's cool, Caroline! What happened that was so awesome?",
    "Caroline: The transgender stories were so inspiring! I was so happy and thankful for all the support.",
    "Melanie: I painted that lake sunrise last year! It's special to me.",
    "Caroline: I'm keen on counseling or working in mental health to support those with similar issues.",
    "Melanie: I'm off to go swimming with the kids. Talk to you soon!",
    "Melanie: I ran a charity race for mental health last Saturday, it was really rewarding.",
    "Caroline: Researching adoption agencies, it's been a dream to have a family.",
]
TASKS = {
    "store": "Caroline transgender stories inspiring support",
    "abstraction": "Caroline LGBTQ support group transgender stories inspiring",
    "consolidated": "Caroline Melanie support group painting charity race",
    "neurons": "Caroline's adoption agency plans for a family",
    "graphs": "Caroline attends the LGBTQ support group",
    "persona": "I value honesty and calm conversations",
    "memorules": "does every release notes changelog entry link its pull request",
    "past_tasks": "Caroline's charity race fundraising page for mental health",
}
"""A task per source that its own kind of memory answers."""


def populate(store: MemoryStore, ns: Namespace, prefix: str) -> None:
    """Write the same small world into every source kind of one namespace, ids prefixed."""
    for i, text in enumerate(TURNS):
        store.add_entry(text, namespace=ns, id=f"{prefix}D1:{i}", memory_type="episodic")
    store.add_entry(
        "I value honesty and calm conversations.", namespace=ns, memory_type="self", id=f"{prefix}me"
    )
    remember(
        store,
        kind="memorule",
        namespace=ns,
        id=f"{prefix}rule",
        memorule_kind="convention",
        subject="Release notes changelog",
        body="Every release notes changelog entry links the pull request it describes.",
        applies_to={"scope": "project"},
        session=WriterSession(session_id="s1", persona="dev"),
    )
    w = Writers.for_store(store)
    w.facts.add_fact(
        "Caroline attended an LGBTQ support group and found the transgender stories inspiring.",
        namespace=ns,
        id=f"{prefix}obs1",
    )
    w.facts.add_fact(
        namespace=ns, subject="Melanie", predicate="painted", object="a lake sunrise", id=f"{prefix}obs2"
    )
    w.knowledge.add_knowledge(
        "Caroline and Melanie talked about the support group, painting and a charity race.",
        namespace=ns,
        provenance=[f"{prefix}D1:0", f"{prefix}D1:6"],
        id=f"{prefix}s1",
    )
    w.neurons.add_neuron(
        "Caroline's adoption plans matter a lot to her.",
        namespace=ns,
        triggers=["adoption agency", "family"],
        importance=1.0,
        id=f"{prefix}n1",
    )
    g = w.graphs
    g.add_node("Caroline", namespace=ns, id=f"{prefix}caroline", description="wants to work in counseling")
    g.add_node("Melanie", namespace=ns, id=f"{prefix}melanie", description="paints and runs charity races")
    g.add_node("LGBTQ support group", namespace=ns, id=f"{prefix}group", aliases=["support group"])
    g.add_edge(f"{prefix}caroline", "attends", f"{prefix}group", namespace=ns)
    g.add_edge(f"{prefix}melanie", "friend of", f"{prefix}caroline", namespace=ns)
    tasks = SqliteTaskRepository.from_store(store)
    done = tasks.create_task(
        "Set up the charity race fundraising page for mental health", namespace=ns, task_id=f"{prefix}task"
    )
    tasks.set_status(done, "completed", namespace=ns)


def bare(entry_id: str) -> str:
    """Return an entry id without its source prefix (`fact:`, `knowledge:`, `graph:`)."""
    for prefix in ("fact:", "knowledge:", "graph:"):
        if entry_id.startswith(prefix):
            return entry_id.removeprefix(prefix)
    return entry_id


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as s:
        populate(s, NS, "mine-")
        yield s


async def fetch_all(sources: Sequence[Source], request: SourceRequest) -> dict[str, Sequence[Candidate]]:
    out: dict[str, Sequence[Candidate]] = {}

    async def one(src: Source) -> None:
        out[src.name] = await src.fetch(request)

    async with anyio.create_task_group() as tg:
        for src in sources:
            tg.start_soon(one, src)
    return out


async def test_the_sources_of_a_sqlite_store_read_in_its_one_thread_lane_by_default(
    store: MemoryStore,
) -> None:
    """Without a limiter given, a SQLite store's sources read in the store's lane of one thread."""
    sources = default_sources(store)
    assert {s._reader.limiter for s in sources} == {None}  # type: ignore[attr-defined]
    assert store.read_lane.threads == store.engine.read_threads == 1


async def test_default_sources_in_order_sharing_one_limiter(store: MemoryStore) -> None:
    """default_sources gives every source in DEFAULT_SOURCES order, all on one limiter."""
    limiter = anyio.CapacityLimiter(3)
    sources = default_sources(store, limiter=limiter)
    assert tuple(s.name for s in sources) == DEFAULT_SOURCES
    assert DEFAULT_SOURCES == (
        "store",
        "neurons",
        "graphs",
        "abstraction",
        "consolidated",
        "persona",
        "memorules",
        "past_tasks",
    )
    assert all(isinstance(s, Source) for s in sources)
    assert {id(s._reader.limiter) for s in sources} == {id(limiter)}  # type: ignore[attr-defined]
    for s in sources:
        await s.open()
        await s.aclose()


async def test_every_source_answers_a_relevant_task(store: MemoryStore) -> None:
    """Each source finds its own kind of memory for a task about it (the fixture is live)."""
    sources = default_sources(store)
    for src in sources:
        got = await src.fetch(SourceRequest(task=TASKS[src.name], namespace=NS))
        assert any(c.score >= RECALL_MIN_SCORE for c in got), src.name


CLOSED_GATE_TASK = "painted"
"""A task the namespace answers only weakly: its gate (about 0.16 in lexical mode) is under the
floor, yet four sources hold texts that match it. (A name the namespace holds, "Melanie", is a
literal match and opens the gate.)"""


async def test_each_source_returns_exactly_its_candidates_at_or_above_the_floor(store: MemoryStore) -> None:
    """A source at the default floor returns what it returns at floor 0, less what scores under
    the floor (and so could never be selected): same candidates, scores and order."""
    floored, everything = default_sources(store), default_sources(store, min_score=0.0)
    below = 0
    for task in [*TASKS.values(), CLOSED_GATE_TASK]:
        request = SourceRequest(task=task, namespace=NS)
        for kept, full in zip(floored, everything, strict=True):
            got = [(c.entry_id, c.score) for c in await kept.fetch(request)]
            wanted = [(c.entry_id, c.score) for c in await full.fetch(request)]
            assert got == [(i, sc) for i, sc in wanted if sc >= RECALL_MIN_SCORE], (task, kept.name)
            below += len(wanted) - len(got)
    assert below > 0  # the floor had something to drop


async def test_a_gate_under_the_floor_gets_nothing_from_any_source(store: MemoryStore) -> None:
    """When the task's gate is under the floor no candidate can clear it (a score is qpp x band):
    every source answers nothing, though at floor 0 several return matches."""
    request = SourceRequest(task=CLOSED_GATE_TASK, namespace=NS)
    weak = await fetch_all(default_sources(store, min_score=0.0), request)
    assert len([name for name, got in weak.items() if got]) >= 3
    assert all(0.0 < c.qpp < RECALL_MIN_SCORE for got in weak.values() for c in got if c.qpp is not None)
    assert await fetch_all(default_sources(store), request) == {name: [] for name in DEFAULT_SOURCES}


@pytest.mark.parametrize(
    "bad", [-0.1, 0.5, 1.5, float("nan"), Decimal("NaN"), Fraction(1, 2), True, "0.4", None]
)
def test_a_bad_source_floor_is_a_config_error(store: MemoryStore, bad: object) -> None:
    """min_score must be a number in [0, RECALL_MIN_SCORE]: a higher one would raise the floor
    the trace reports; anything else is refused before a source is built."""
    with pytest.raises(ConfigError, match="min_score"):
        default_sources(store, min_score=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("floor", [Fraction(1, 5), Decimal("0.2"), 0, 0.2])
def test_any_real_number_in_range_is_a_source_floor(store: MemoryStore, floor: object) -> None:
    """A Fraction or a Decimal floor is a number like any other: every source gets it as a float."""
    sources = default_sources(store, min_score=floor)  # type: ignore[arg-type]
    assert {s.min_score for s in sources} == {float(floor)}  # type: ignore[arg-type, attr-defined]
    assert all(type(s.min_score) is float for s in sources)  # type: ignore[attr-defined]


def test_every_bad_argument_is_named_in_one_config_error(store: MemoryStore) -> None:
    """A bad result_cache and a bad min_score are reported together, not the first alone."""
    with pytest.raises(ConfigError, match="result_cache") as info:
        default_sources(store, result_cache=-1, min_score=2.0)
    assert "min_score" in str(info.value)


def test_a_sources_floor_is_checked_and_fixed_at_construction(store: MemoryStore) -> None:
    """A source's floor is a float in [0, 1] set once: its kept answers were read at it."""
    source = default_sources(store)[0]
    with pytest.raises(attrs.exceptions.FrozenAttributeError):
        source.min_score = 0.0  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        NeuronSource(StoreReader(store=store), min_score="0.4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_score"):
        NeuronSource(StoreReader(store=store), min_score=1.5)


async def test_trivial_tasks_get_nothing_above_the_floor_from_any_source(store: MemoryStore) -> None:
    """On a populated multi-source store, a trivial task gets zero above-floor candidates anywhere."""
    sources = default_sources(store)
    for task in TRIVIAL:
        results = await fetch_all(sources, SourceRequest(task=task, namespace=NS))
        assert set(results) == set(DEFAULT_SOURCES)
        above = {
            name: [c.entry_id for c in got if c.score >= RECALL_MIN_SCORE] for name, got in results.items()
        }
        assert above == {name: [] for name in DEFAULT_SOURCES}, task


async def test_no_source_crosses_a_namespace(store: MemoryStore) -> None:
    """Every source answers from the request's namespace only, never from another tenant's."""
    populate(store, OTHER, "other-")
    sources = default_sources(store)
    for task in TASKS.values():
        for ns, prefix in ((OTHER, "other-"), (NS, "mine-")):
            results = await fetch_all(sources, SourceRequest(task=task, namespace=ns, limit=50))
            ids = [bare(c.entry_id) for got in results.values() for c in got]
            assert ids
            assert all(i.startswith(prefix) for i in ids), (task, ids)
        stranger = await fetch_all(sources, SourceRequest(task=task, namespace=Namespace(tenant_id="new")))
        assert all(not got for got in stranger.values())


async def test_writers_facade(store: MemoryStore) -> None:
    """Writers.for_store gives one writer per source kind, bound to the store."""
    w = Writers.for_store(store)
    assert w.facts.delete_fact("mine-obs2", namespace=NS) is True
    assert w.knowledge.delete_knowledge("mine-s1", namespace=NS) is True
    assert w.neurons.delete_neuron("mine-n1", namespace=NS) is True
    assert w.graphs.delete_node("mine-group", namespace=NS) is True


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_no_built_in_source_blocks_the_event_loop(tmp_path: Path, mode: str) -> None:
    """Every default source runs its blocking work in worker threads: none holds the loop (real clock)."""
    with MemoryStore.open(tmp_path / f"{mode}.db", mode=mode) as s:
        populate(s, NS, "mine-")
        for source in default_sources(s):
            request = SourceRequest(task=TASKS[source.name], namespace=NS, limit=10, mode=mode)
            await check_source_never_blocks(source, request)


_DAMAGE = (
    "UPDATE entries SET metadata = '{oops' WHERE id LIKE 'bad-%' AND kind != 'memorule'",
    "UPDATE facts SET metadata = '{oops' WHERE id LIKE 'bad-%'",
    "UPDATE knowledge SET provenance = '[oops' WHERE id LIKE 'bad-%'",
    "UPDATE graph_nodes SET aliases = '[oops' WHERE id LIKE 'bad-%'",
    (
        "UPDATE memorule_states SET applies_to = '{oops' "
        "WHERE entry_rowid IN (SELECT rowid FROM entries WHERE id LIKE 'bad-%')"
    ),
)


async def test_a_damaged_row_is_skipped_and_logged_and_the_rest_served(
    tmp_path: Path, trace_events: list[dict[str, object]]
) -> None:
    """Invalid JSON in one row (metadata, provenance, aliases, applies_to) must not fail a source."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as store:
        populate(store, NS, "good-")
        populate(store, NS, "bad-")
        with store.db.write() as conn:
            for sql in _DAMAGE:
                assert conn.execute(sql).rowcount > 0, sql
        for src in default_sources(store):
            if src.name == "past_tasks":  # tasks hold no JSON column to damage
                continue
            got = await src.fetch(SourceRequest(task=TASKS[src.name], namespace=NS, limit=50))
            ids = [bare(c.entry_id) for c in got]
            assert any(i.startswith("good-") for i in ids), src.name
            assert not any(i.startswith("bad-") for i in ids), (src.name, ids)
    damaged = {str(e["id"]) for e in trace_events if e["event"] == "store.row_damaged"}
    assert damaged
    assert all(i.startswith("bad-") for i in damaged), damaged


async def _turns(store: MemoryStore, n: int) -> list[dict[str, str]]:
    """Run n turns of every default source through the selector; each turn's statuses (under a
    deadline no loaded machine misses: a source that times out would hide what a page did)."""
    out = []
    async with open_selector(default_sources(store), deadline=30) as selector:
        for task in list(TASKS.values())[:n]:
            result = await selector.select_for_task(task, namespace=NS)
            out.append({o.name: str(o.status) for o in result.sources})
    return out


async def test_a_corrupt_page_fails_the_sources_that_read_it_and_the_turn_still_completes(
    tmp_path: Path,
) -> None:
    """Real corrupt pages: the sources reading them fail as a status; no turn raises."""
    path = tmp_path / "m.db"
    with MemoryStore.open(path, mode="lexical") as store:
        populate(store, NS, "mine-")
        store.add_entries(
            [NewEntry(text=f"filler note {i} " + "word " * 50) for i in range(300)], namespace=NS
        )
    conn = sqlite3.connect(path)
    pages = [
        r[0] for r in conn.execute("SELECT rootpage FROM sqlite_master WHERE name IN ('entries', 'facts')")
    ]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    for page in pages:  # zero each table's root page: its b-tree header is gone
        start = (page - 1) * page_size
        data[start : start + page_size] = bytes(page_size)
    path.write_bytes(bytes(data))
    with MemoryStore.open(path, mode="lexical") as store:
        turns = await _turns(store, len(TASKS))
    assert len(turns) == len(TASKS)
    assert any("failed" in t.values() for t in turns), turns
    assert all({"ok", "empty"} & set(t.values()) for t in turns), turns  # the others still answer


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_a_selector_without_a_mode_runs_and_traces_the_stores_mode(tmp_path: Path, mode: str) -> None:
    """`open_selector(default_sources(store))` asks its sources in the store's mode and reports it."""
    with MemoryStore.open(tmp_path / f"{mode}.db", mode=mode) as s:
        populate(s, NS, "mine-")
        sources = default_sources(s)
        assert {source.default_mode for source in sources} == {mode}
        async with open_selector(sources, deadline=30) as selector:
            result = await selector.select_for_task(TASKS["store"], namespace=NS)
    assert selector.mode == mode
    assert result.mode == mode
