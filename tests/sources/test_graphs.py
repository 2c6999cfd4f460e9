"""Tests of entity graphs: the writer (keys, edges, deletes) and the `graphs` source (BFS)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from store_kit import StoreOpener, sql_rows

from broker import RECALL_MIN_SCORE, Candidate, Namespace, ValidationError
from broker.abc import SourceRequest
from sources import MemoryStore, NewEntry
from sources._graphs import DENSE_SCORED, HOP_DECAY, GraphSource, GraphWriter, _named_keys, _own_evidence
from sources._store_reader import StoreReader
from sources.embedding._embedder import MiniLMEmbedder, load_default_embedder
from sources.relevance._shared_terms import shared_term_logits, sigmoid
from sources.storage import _analysis
from sources.storage._analysis import query_terms
from sources.storage._graph_walk import Node, Walk, task_grams

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

NS = Namespace(tenant_id="alice")
OTHER = Namespace(tenant_id="bob")


@pytest.fixture
def store(filler_store: MemoryStore) -> MemoryStore:
    g = GraphWriter(filler_store)
    g.add_node("Caroline", namespace=NS, id="caroline", description="a counsellor in training")
    g.add_node(
        "LGBTQ support group",
        namespace=NS,
        id="group",
        aliases=["the support group"],
        description="meets every Tuesday evening at the community centre",
    )
    g.add_node("Melanie", namespace=NS, id="melanie", description="a painter and Caroline's friend")
    g.add_edge("caroline", "attends", "group", namespace=NS)
    g.add_edge("melanie", "friend of", "caroline", namespace=NS)
    return filler_store


def source(store: MemoryStore) -> GraphSource:
    """The graph source with its floor at 0: these tests read the walk's below-floor nodes too."""
    return GraphSource(StoreReader(store=store), min_score=0.0)


async def fetch(
    store: MemoryStore,
    task: str,
    ns: Namespace = NS,
    *,
    limit: int = 10,
    types: tuple[str, ...] | None = None,
) -> dict[str, Candidate]:
    got = await source(store).fetch(SourceRequest(task=task, namespace=ns, limit=limit, types=types))
    return {c.entry_id: c for c in got}


async def test_mentioned_node_and_its_edge_are_found(store: MemoryStore) -> None:
    """Nodes the task names are found by n-gram match and told by the edge joining them."""
    got = await fetch(store, "When does Caroline's LGBTQ support group meet on Tuesday evening?")
    group = got["graph:group"]
    assert group.text == (
        "Caroline — attends → LGBTQ support group: meets every Tuesday evening at the community centre"
    )
    assert group.score >= RECALL_MIN_SCORE
    assert group.memory_type == "semantic"
    assert group.metadata["hop"] == 0


async def test_a_named_node_without_a_description_is_told_by_its_edges_only(store: MemoryStore) -> None:
    """A node the task names without a description is no candidate (unless named by an alias:
    its name then says which entity is meant); the edge of its neighbour tells it."""
    g = GraphWriter(store)
    g.add_node("billing service", namespace=NS, id="billing")
    g.add_node("Ana", namespace=NS, id="ana", description="leads the billing team")
    g.add_edge("ana", "owns", "billing", namespace=NS)
    got = await fetch(store, "Who owns the billing service?")
    assert "graph:billing" not in got
    assert got["graph:ana"].text == "Ana — owns → billing service; Ana: leads the billing team"
    described = await fetch(store, "Tell me about Caroline")
    assert described["graph:caroline"].text == "Caroline: a counsellor in training"
    g.add_node("payments service", namespace=NS, id="pay", aliases=["the ledger"])
    aliased = await fetch(store, "What is the ledger?")
    assert aliased["graph:pay"].text == "payments service (also the ledger)"
    by_name = await fetch(store, "Is the payments service down?")  # its aliases say nothing new
    assert "graph:pay" not in by_name


async def test_alias_is_a_key(store: MemoryStore) -> None:
    """An alias finds its node just as the name does."""
    got = await fetch(store, "what happens at the support group")
    assert got["graph:group"].metadata["hop"] == 0


async def test_hop_decay_is_applied(store: MemoryStore) -> None:
    """A neighbour's score is its rendered text's calibrated score times the hop decay."""
    task = "Melanie friend of Caroline the counsellor in training"
    got = await fetch(store, task)
    caroline = got["graph:caroline"]
    assert caroline.metadata["hop"] == 0
    group = got["graph:group"]
    assert group.metadata["hop"] == 1
    with store.db.read() as conn:
        raw = store.scorer(conn, task, namespace=NS, mode="lexical").score(_analysis.terms(group.text))
    assert group.text.startswith("Caroline — attends → LGBTQ support group")
    assert group.score == pytest.approx(raw * HOP_DECAY[1])


async def test_bfs_never_goes_past_two_hops(store: MemoryStore) -> None:
    """A node three hops from every mentioned node is never returned, even if its text matches."""
    g = GraphWriter(store)
    for name in ("Alpha", "Beta", "Gamma", "Delta"):
        g.add_node(name, namespace=NS, id=name.lower(), description="a station of the orbital relay chain")
    g.add_edge("alpha", "links", "beta", namespace=NS)
    g.add_edge("gamma", "links", "beta", namespace=NS)  # reverse direction is followed too
    g.add_edge("gamma", "links", "delta", namespace=NS)
    got = await fetch(store, "Alpha orbital relay chain station", limit=50)
    assert {"graph:alpha", "graph:beta", "graph:gamma"} <= set(got)
    assert got["graph:gamma"].metadata["hop"] == 2
    assert "graph:delta" not in got
    assert "graph:delta" in await fetch(store, "Beta orbital relay chain station", limit=50)


@pytest.mark.parametrize("task", ["what time is it", "hi", "tell me a joke"])
async def test_trivial_task_gets_nothing(store: MemoryStore, task: str) -> None:
    """A trivial task names no entity, so the graph returns nothing."""
    assert await fetch(store, task) == {}


async def test_namespace_isolation(store: MemoryStore) -> None:
    """Nodes and edges of one namespace are never reached from another."""
    GraphWriter(store).add_node("Caroline", namespace=OTHER, id="caroline", description="Bob's aunt")
    got = await fetch(store, "Caroline support group", ns=OTHER)
    assert set(got) == {"graph:caroline"}
    assert got["graph:caroline"].text == "Caroline: Bob's aunt"


async def test_typed_request_without_semantic_skips_the_graph(store: MemoryStore) -> None:
    """Graph candidates are semantic: a typed request for other types gets none."""
    assert await fetch(store, "Caroline support group", types=("self",)) == {}
    assert await fetch(store, "Caroline support group", types=("semantic",))


def test_invalid_node_and_edge_report_every_field(store: MemoryStore) -> None:
    """Bad names, aliases and edges raise one ValidationError each with all field errors."""
    g = GraphWriter(store)
    with pytest.raises(ValidationError) as info:
        g.add_node("the", namespace=NS, aliases=["", "red green blue yellow purple"], description=3)  # type: ignore[arg-type]
    assert {(e.field, e.code) for e in info.value.errors} == {
        ("name", "no_terms"),
        ("aliases[0]", "empty"),
        ("aliases[1]", "too_many_terms"),
        ("description", "type"),
    }
    with pytest.raises(ValidationError) as info:
        g.add_edge("caroline", "knows", "nobody", namespace=NS)
    assert [(e.field, e.code) for e in info.value.errors] == [("dst_id", "not_found")]
    with pytest.raises(ValidationError, match="self_loop"):
        g.add_edge("caroline", "knows", "caroline", namespace=NS)
    with pytest.raises(ValidationError, match="exists"):
        g.add_node("Caroline", namespace=NS, id="caroline")


async def test_a_batch_writes_nodes_and_the_edges_between_them_at_once(store: MemoryStore) -> None:
    """Nodes and an edge written in one batch are found together by the walk."""
    with GraphWriter(store).batch() as graph:
        graph.add_node("Pottery class", namespace=NS, id="pottery", description="Saturday mornings")
        assert graph.add_edge("caroline", "takes", "pottery", namespace=NS) is True
        assert graph.add_edge("caroline", "takes", "pottery", namespace=NS) is False
    got = await fetch(store, "When is Caroline's pottery class?")
    assert "graph:pottery" in got
    assert got["graph:caroline"].text.startswith("Caroline — takes → Pottery class")


def test_a_batch_knows_the_nodes_it_wrote_and_found(store: MemoryStore) -> None:
    """Within one batch a node missing at first is found once written, refused again (without
    `replace`), kept in place when replaced, and joins edges; a node of an earlier write is found."""
    with GraphWriter(store).batch() as graph:
        with pytest.raises(ValidationError, match="not_found"):
            graph.add_edge("caroline", "takes", "pottery", namespace=NS)
        graph.add_node("Pottery class", namespace=NS, id="pottery")
        with pytest.raises(ValidationError, match="exists"):
            graph.add_node("Pottery class", namespace=NS, id="pottery")
        with pytest.raises(ValidationError, match="exists"):
            graph.add_node("Caroline", namespace=NS, id="caroline")
        graph.add_node("Pottery studio", namespace=NS, id="pottery", replace=True)
        assert graph.add_edge("caroline", "takes", "pottery", namespace=NS) is True
        with pytest.raises(ValidationError, match="not_found"):
            graph.add_edge("pottery", "taught by", "nobody", namespace=NS)
    assert sql_rows(store, "SELECT name FROM graph_nodes WHERE id = 'pottery'") == [("Pottery studio",)]
    assert sql_rows(
        store,
        "SELECT count(*) FROM graph_edges e JOIN graph_nodes d ON d.rowid = e.dst_rowid WHERE d.id = 'pottery'",
    ) == [(1,)]


def test_a_batch_that_raises_writes_nothing(store: MemoryStore) -> None:
    """A refused write inside a batch rolls the whole batch back, earlier writes included."""

    def load() -> None:
        with GraphWriter(store).batch() as graph:
            graph.add_node("Pottery class", namespace=NS, id="pottery")
            graph.add_edge("pottery", "taught by", "nobody", namespace=NS)

    with pytest.raises(ValidationError, match="not_found"):
        load()
    assert sql_rows(store, "SELECT count(*) FROM graph_nodes WHERE id = 'pottery'") == [(0,)]


def test_a_batch_refuses_writes_after_its_block(store: MemoryStore) -> None:
    """A batch kept past its block refuses to write: its transaction is over."""
    with GraphWriter(store).batch() as graph:
        graph.add_node("Pottery class", namespace=NS, id="pottery")
    with pytest.raises(RuntimeError, match="ended"):
        graph.add_node("Kiln", namespace=NS, id="kiln")
    assert sql_rows(store, "SELECT count(*) FROM graph_nodes WHERE id = 'kiln'") == [(0,)]


def test_edges_are_idempotent_and_deletes_are_clean(store: MemoryStore) -> None:
    """A repeated edge is not duplicated; deleting a node removes its keys and edges."""
    g = GraphWriter(store)
    assert g.add_edge("caroline", "attends", "group", namespace=NS) is False
    assert g.delete_edge("melanie", "friend of", "caroline", namespace=NS) is True
    assert g.delete_edge("melanie", "friend of", "caroline", namespace=NS) is False
    assert g.delete_node("caroline", namespace=NS) is True
    assert g.delete_node("caroline", namespace=NS) is False
    assert sql_rows(store, "SELECT count(*) FROM graph_edges") == [(0,)]
    assert sql_rows(store, "SELECT count(*) FROM graph_keys WHERE key = 'carolin'") == [(0,)]


async def test_replace_rekeys_a_node_and_keeps_its_edges(store: MemoryStore) -> None:
    """Replacing a node updates its keys in place; its edges survive."""
    GraphWriter(store).add_node("Caro", namespace=NS, id="caroline", replace=True, description="renamed")
    assert "graph:caroline" not in await fetch(store, "Caroline")
    got = await fetch(store, "Caro attends LGBTQ support group")
    assert got["graph:group"].metadata["hop"] == 0
    assert got["graph:caroline"].metadata["hop"] == 0


class UnitEmbedder:
    """A fake embedder: every text is the same unit vector; counts the texts it embeds."""

    model_id = "fake-unit"
    dim = 2

    def __init__(self) -> None:
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return one unit row per text."""
        self.texts += len(texts)
        return np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (len(texts), 1))


async def test_dense_modes_embed_only_a_few_rendered_texts(make_store: StoreOpener) -> None:
    """In a dense mode at most DENSE_SCORED graph texts are embedded and scored on the calibrated scale per turn; the others keep only their own evidence."""
    fake = UnitEmbedder()
    with make_store(mode="hybrid", embedder=fake) as store:
        g = GraphWriter(store)
        g.add_node("Hub", namespace=NS, id="hub", description="the central hub station")
        for i in range(10):
            g.add_node(f"Spoke {i}", namespace=NS, id=f"s{i}", description="a spoke of the hub station")
            g.add_edge("hub", "links", f"s{i}", namespace=NS)
        before = fake.texts
        got = await GraphSource(StoreReader(store=store), min_score=0.0).fetch(
            SourceRequest(task="Hub station spokes", namespace=NS, limit=10)
        )
        lexical = await GraphSource(StoreReader(store=store), min_score=0.0).fetch(
            SourceRequest(task="Hub station spokes", namespace=NS, limit=10, mode="lexical")
        )
    assert 0 < sum(c.qpp is not None for c in got) <= DENSE_SCORED
    # The task; the one node it names, once, for the namespace's reference; the rendered texts.
    assert fake.texts - before == 1 + 1 + DENSE_SCORED
    assert len(lexical) == 10


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return load_default_embedder()


ORION = (
    ("orion", "Orion gateway", "The API gateway in front of the billing and search services."),
    ("502", "502 errors", "Orion returns 502 when the billing service health check fails."),
    ("billing", "billing service", ""),
)


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
async def test_a_store_of_graph_records_only_serves_a_task_naming_its_nodes(
    make_store: StoreOpener, minilm: MiniLMEmbedder, mode: str
) -> None:
    """With no memories beside it, the graph's named nodes are the namespace's dense evidence:
    the gate opens for a task about them (it read no cosine at all and closed) and stays shut
    for a task that names none."""
    with make_store(mode=mode, embedder=minilm) as store:
        g = GraphWriter(store)
        for key, name, description in ORION:
            g.add_node(name, namespace=NS, id=key, description=description)
        g.add_edge("orion", "routes to", "billing", namespace=NS)
        g.add_edge("502", "caused by", "billing", namespace=NS)
        walk = GraphSource(StoreReader(store=store))
        about = SourceRequest(task="Why is the Orion gateway returning 502 errors?", namespace=NS, limit=5)
        unrelated = SourceRequest(task="what time is it", namespace=NS, limit=5)
        served = await walk.fetch(about)
        assert [c.entry_id for c in served][:1] == ["graph:502"]
        assert served[0].score >= RECALL_MIN_SCORE
        assert await walk.fetch(unrelated) == []


def _ledger(store: MemoryStore, users: int = 0, maintainers: tuple[str, ...] = ("Ana",)) -> None:
    """Two notes that say nothing of Ledger; Ledger, its maintainers and `users` services using it."""
    store.add_entries(
        [NewEntry(text="Deploys happen on Tuesdays."), NewEntry(text="Staging is refreshed every Sunday.")],
        namespace=NS,
    )
    g = GraphWriter(store)
    g.add_node("Ledger", namespace=NS, id="ledger")
    for name in maintainers:
        g.add_node(name, namespace=NS, id=name.lower())
        g.add_edge(name.lower(), "maintains", "ledger", namespace=NS)
    for i in range(users):
        g.add_node(f"Service {i}", namespace=NS, id=f"svc{i}")
        g.add_edge(f"svc{i}", "uses", "ledger", namespace=NS)


def _gate(store: MemoryStore, task: str) -> float:
    with store.engine.read() as conn:
        return store.scorer_on(conn, conn.namespace_id(NS), task, mode=store.mode).qpp


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_a_fact_the_task_asks_about_is_served_on_its_own_evidence(
    make_store: StoreOpener, minilm: MiniLMEmbedder, mode: str
) -> None:
    """With the gate closed, a task naming a node and sharing its edge's relation gets that edge on its own evidence (no gate or band; the likelihood ratio of the shared terms, the named node's as if one fact held it, times the hop decay); a task that only names the node gets nothing on it."""
    with make_store(mode=mode, embedder=minilm) as store:
        _ledger(store)
        task = "Who maintains Ledger?"
        assert _gate(store, task) < RECALL_MIN_SCORE
        asked = await GraphSource(StoreReader(store=store)).fetch(
            SourceRequest(task=task, namespace=NS, limit=5)
        )
        assert [(c.entry_id, c.text) for c in asked] == [("graph:ana", "Ana — maintains → Ledger")]
        assert (asked[0].qpp, asked[0].band) == (None, None)
        own = sigmoid(
            shared_term_logits(frozenset(query_terms(task)), [frozenset(query_terms(asked[0].text))])[0]
        )
        assert asked[0].score == pytest.approx(own * HOP_DECAY[1])  # Ana: one hop from Ledger
        below = await GraphSource(StoreReader(store=store), min_score=0.0).fetch(
            SourceRequest(task="Deploy Ledger to staging", namespace=NS, limit=5)
        )
        assert all(c.score < RECALL_MIN_SCORE for c in below if c.qpp is None), below


async def test_a_named_hub_still_serves_the_facts_the_task_asks_about(make_store: StoreOpener) -> None:
    """The facts around a node with many edges all hold its name: the name counts as distinctive, so each of three maintainers of a node twenty services use is served (with the gate closed) and no user is."""
    store = make_store(mode="lexical")
    _ledger(store, users=20, maintainers=("Ana", "Bo", "Cleo"))
    task = "Who maintains Ledger?"
    assert _gate(store, task) < RECALL_MIN_SCORE
    asked = await GraphSource(StoreReader(store=store)).fetch(
        SourceRequest(task=task, namespace=NS, limit=10)
    )
    assert sorted(c.entry_id for c in asked) == ["graph:ana", "graph:bo", "graph:cleo"]


@pytest.mark.parametrize(
    ("task", "served"),
    [
        ("Restart Payment Service", []),
        ("Deploy Payment Service to staging", []),
        ("Who maintains Payment Service?", [0]),
        ("Who maintains the payment service?", [0]),
    ],
)
def test_a_name_of_many_words_is_one_piece_of_evidence(task: str, served: list[int]) -> None:
    """A two-word name the task uses counts as one shared term (weighed as if one fact held it): naming the entity alone clears nothing on own evidence, naming it and the relation serves the fact that holds both."""
    facts = [
        "Ana — maintains → Payment Service",
        *(f"Service {i} — calls → Payment Service" for i in range(5)),
    ]
    keys = _named_keys(
        Walk(
            nodes={
                1: Node(
                    rowid=1,
                    id="pay",
                    name="Payment Service",
                    aliases=("ledger service",),
                    description="",
                    created_at="",
                )
            },
            hops={1: 0},
            via={},
        ),
        task_grams(task),
    )
    assert keys == {"payment servic"}  # the alias the task did not use is no key
    own = _own_evidence(frozenset(query_terms(task)), [_analysis.terms(f) for f in facts], keys)
    assert [i for i, p in enumerate(own) if p >= RECALL_MIN_SCORE] == served, own
