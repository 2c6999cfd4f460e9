"""The LangGraph store: LangGraph's BaseStore interface over the broker's memory, and a real graph."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, TypedDict

import pytest

pytest.importorskip(
    "langgraph", reason="the [langgraph] extra is not installed (pip install -e '.[langgraph]')"
)

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp, SearchOp

from broker import Namespace
from context_broker.langgraph import BrokerStore
from sources import MemoryStore, NewEntry

if TYPE_CHECKING:
    from collections.abc import Iterator

ACME = ("acme", "web")
FILLER = (
    "Bought groceries for the week: rice, beans and coffee.",
    "The train to Lyon was delayed by forty minutes.",
    "Planted tomatoes and basil on the balcony.",
    "Watched a documentary about deep sea creatures.",
)
FREEZE = "Deploys freeze every Friday after the payment incident."


@pytest.fixture
def memory(tmp_path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / "m.db", mode="hybrid") as store:
        for ns in (
            Namespace(tenant_id="acme", project_id="web"),
            Namespace(tenant_id="globex", project_id="web"),
        ):
            store.add_entries([NewEntry(text=t) for t in FILLER], namespace=ns)
        yield store


@pytest.fixture
def store(memory) -> BrokerStore:
    return BrokerStore(memory)


def test_put_then_get_returns_the_value(store):
    """`get` returns exactly the value `put` wrote, with its namespace and key."""
    store.put(ACME, "freeze", {"text": FREEZE, "source": "postmortem", "tags": ["deploy"]})
    item = store.get(ACME, "freeze")
    assert (item.namespace, item.key) == (ACME, "freeze")
    assert item.value == {"text": FREEZE, "source": "postmortem", "tags": ["deploy"]}
    assert store.get(ACME, "missing") is None


def test_put_again_updates_and_keeps_created_at(store):
    """A second put replaces the value; created_at stays, updated_at moves on."""
    store.put(ACME, "k", {"text": "first version of the note"})
    first = store.get(ACME, "k")
    store.put(ACME, "k", {"text": "second version of the note"})
    second = store.get(ACME, "k")
    assert second.value == {"text": "second version of the note"}
    assert second.created_at == first.created_at
    assert second.updated_at >= first.updated_at


def test_search_goes_through_the_floor(store):
    """A relevant query finds the item with its calibrated score; a trivial one finds nothing."""
    store.put(ACME, "freeze", {"text": FREEZE})
    hits = store.search(ACME, query="can we deploy the payment fix on Friday?")
    assert [h.key for h in hits] == ["freeze"]
    assert 0.42 <= hits[0].score <= 1.0
    assert store.search(ACME, query="what time is it") == []


def test_search_never_crosses_a_tenant(store):
    """A namespace sees only its own items; a tenant prefix searches its projects only."""
    store.put(ACME, "freeze", {"text": FREEZE})
    assert store.search(("globex", "web"), query="can we deploy the payment fix on Friday?") == []
    assert store.search(("globex",), query="can we deploy the payment fix on Friday?") == []
    assert [h.key for h in store.search(("acme",), query="can we deploy the payment fix on Friday?")][:1] == [
        "freeze"
    ]


def test_search_without_query_lists_and_filters(store):
    """No query: the namespace's items, filtered on value keys, paged by limit and offset."""
    store.put(ACME, "a", {"text": "alpha note for the listing", "type": "x"})
    store.put(ACME, "b", {"text": "beta note for the listing", "type": "y"})
    assert [i.key for i in store.search(ACME, filter={"type": "y"})] == ["b"]
    listed = store.search(ACME, limit=100)
    assert {"a", "b"} <= {i.key for i in listed}
    assert len(listed) == len(FILLER) + 2
    assert len(store.search(ACME, limit=2, offset=1)) == 2


def test_delete_removes_the_item(store):
    """After delete, get and search find nothing."""
    store.put(ACME, "freeze", {"text": FREEZE})
    store.delete(ACME, "freeze")
    assert store.get(ACME, "freeze") is None
    assert "freeze" not in {
        h.key for h in store.search(ACME, query="can we deploy the payment fix on Friday?")
    }


def test_list_namespaces_with_prefix_suffix_and_depth(store):
    """Namespaces are (tenant, project) pairs, filtered like LangGraph's own stores."""
    store.put(("acme", "mobile"), "k", {"text": "mobile release train leaves on Tuesdays"})
    assert store.list_namespaces() == [("acme", "mobile"), ("acme", "web"), ("globex", "web")]
    assert store.list_namespaces(prefix=("acme",)) == [("acme", "mobile"), ("acme", "web")]
    assert store.list_namespaces(suffix=("web",)) == [("acme", "web"), ("globex", "web")]
    assert store.list_namespaces(prefix=("*", "web")) == [("acme", "web"), ("globex", "web")]
    assert store.list_namespaces(max_depth=1) == [("acme",), ("globex",)]


def test_batch_runs_ops_in_order(store):
    """One result per op, in order; a put's result is None."""
    results = store.batch(
        [
            PutOp(ACME, "k", {"text": FREEZE}),
            GetOp(ACME, "k"),
            SearchOp(ACME, query="deploy on Friday payment fix"),
        ]
    )
    assert results[0] is None
    assert results[1].value == {"text": FREEZE}
    assert [i.key for i in results[2]] == ["k"]


def test_namespaces_must_be_tenant_and_project(store):
    """Other shapes are refused with LangGraph's own error."""
    with pytest.raises(InvalidNamespaceError):
        store.put(("acme",), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.get(("acme", "web", "extra"), "k")


def test_async_variants_match_the_sync_ones(store):
    """Aput / aget / asearch / adelete / alist_namespaces on asyncio, as LangGraph runs them."""

    async def run() -> tuple:
        await store.aput(ACME, "freeze", {"text": FREEZE})
        item = await store.aget(ACME, "freeze")
        hits = await store.asearch(ACME, query="can we deploy the payment fix on Friday?")
        spaces = await store.alist_namespaces()
        await store.adelete(ACME, "freeze")
        return item.value, [h.key for h in hits], spaces, await store.aget(ACME, "freeze")

    assert asyncio.run(run()) == ({"text": FREEZE}, ["freeze"], [("acme", "web"), ("globex", "web")], None)


# -- a real graph ---------------------------------------------------------------------------


class State(TypedDict, total=False):
    """The graph's state: who, what to remember, what to answer."""

    user: str
    note: str
    question: str
    answer: str


def _graph(store: BaseStore):
    """Two deterministic nodes (no model): one remembers the note, one answers from memory."""

    def remember(state: State, runtime: Runtime) -> State:
        runtime.store.put((state["user"], "notes"), "latest", {"text": state["note"]})
        return {}

    def answer(state: State, runtime: Runtime) -> State:
        hits = runtime.store.search((state["user"], "notes"), query=state["question"], limit=3)
        return {"answer": hits[0].value["text"] if hits else "I don't know."}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    return builder.compile(store=store)


def test_a_graph_writes_and_reads_memory(memory):
    """A compiled graph given `store=` remembers a note and recalls it for a relevant question only."""
    memory.add_entries(
        [NewEntry(text=t) for t in FILLER], namespace=Namespace(tenant_id="ada", project_id="notes")
    )
    graph = _graph(BrokerStore(memory))
    out = graph.invoke(
        {"user": "ada", "note": FREEZE, "question": "Can we deploy the payment fix on Friday?"}
    )
    assert out["answer"] == FREEZE
    out = graph.invoke({"user": "ada", "note": FREEZE, "question": "what time is it"})
    assert out["answer"] == "I don't know."


def test_a_graph_runs_async(memory):
    """The same graph under ainvoke goes through abatch."""
    memory.add_entries(
        [NewEntry(text=t) for t in FILLER], namespace=Namespace(tenant_id="ada", project_id="notes")
    )
    graph = _graph(BrokerStore(memory))
    question = {"user": "ada", "note": FREEZE, "question": "Can we deploy the payment fix on Friday?"}
    assert asyncio.run(graph.ainvoke(question))["answer"] == FREEZE
