"""Entity graphs: nodes (names, aliases, a description) and typed edges, their writer and
their source.

The source finds the nodes a task names and walks the graph from them (lexically, no NER
model: `sources.storage._graph_walk`); each reached node is rendered as the fact that reached
it ("Caroline — attends → LGBTQ support group: <description>") and scored on the one
calibrated scale when the task's gate is open, and on its own evidence (the terms the task
shares with it) in any case, the higher of the two, times a hop decay, so a distant node needs
stronger evidence to clear the same floor.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, TypedDict, Unpack

import attrs

from broker import RECALL_MIN_SCORE, Candidate, FieldError, Namespace, ValidationError

from ._scoring import Batch, best_first, lexical_scores, score_rows
from ._source_base import ReaderSource
from .relevance._relevance import DENSE_MODES
from .relevance._shared_terms import shared_term_logits, sigmoid
from .storage import _analysis, _validate
from .storage._engine_corpora import Edge, NodeRecord
from .storage._graph_walk import (
    MAX_KEY_TERMS,
    Node,
    Walk,
    bfs,
    key_of,
    mentioned,
    named_by_alias,
    render,
    task_grams,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from broker.abc import SourceRequest

    from ._store import MemoryStore
    from ._store_reader import Gate
    from .relevance._scorer import Relevance, Scorer
    from .storage._engine import Reader, Writer

MAX_NAME_CHARS = 200
"""Longest node name, alias or relation accepted, in characters."""
MAX_ALIASES = 32
"""Aliases one node may have."""
HOP_DECAY: tuple[float, ...] = (1.0, 0.85, 0.7)
"""Score factor by hop distance: a node the task names keeps its score; a neighbour keeps
85% and a neighbour's neighbour 70%, so indirect evidence must be stronger to clear the
floor (0.42 needs a raw 0.49 at one hop and 0.6 at two)."""
GRAPH_TYPE = "semantic"
"""The memory type of every graph candidate."""
DENSE_SCORED = 4
"""Graph candidates one request scores on the calibrated scale in a dense mode (each is
embedded in the turn); the others keep only their own evidence."""


class NodeFields(TypedDict, total=False):
    """A node's optional fields (`GraphWriter.add_node`'s keywords), as `GraphBatch.add_node` takes them."""

    aliases: Sequence[str]
    description: str
    id: str | None
    created_at: str | None
    replace: bool


@attrs.define(eq=False)
class GraphWriter:
    """Writes and deletes the graph of one store (blocking; run it in a worker thread).

    Each call is its own transaction; `batch()` holds one transaction for many writes.
    """

    _store: MemoryStore

    def add_node(  # noqa: PLR0913 - the documented keyword API
        self,
        name: str,
        *,
        namespace: Namespace,
        aliases: Sequence[str] = (),
        description: str = "",
        id: str | None = None,  # noqa: A002 - the documented API name
        created_at: str | None = None,
        replace: bool = False,
    ) -> str:
        """Write one node and its keys; return its id.

        With `replace`, an existing node of that id is updated in place (its edges stay).
        ValidationError (every field error, nothing written) on bad input or an existing id.
        """
        fields = NodeFields(
            aliases=aliases, description=description, id=id, created_at=created_at, replace=replace
        )
        with self.batch() as graph:
            return graph.add_node(name, namespace=namespace, **fields)

    def add_edge(
        self,
        src_id: str,
        relation: str,
        dst_id: str,
        *,
        namespace: Namespace,
        created_at: str | None = None,
    ) -> bool:
        """Write one typed edge between two nodes of the namespace; return False if it existed.

        ValidationError when either node is missing, the relation is bad, or src is dst.
        """
        with self.batch() as graph:
            return graph.add_edge(src_id, relation, dst_id, namespace=namespace, created_at=created_at)

    @contextlib.contextmanager
    def batch(self) -> Iterator[GraphBatch]:
        """One transaction for many node and edge writes (`GraphBatch`: `add_node` and
        `add_edge` as here), committed when the block ends, rolled back whole when an error
        leaves it (a refused write caught inside the block does not undo the others): a bulk
        load pays one commit, not one a row. The store's write lock is held meanwhile, so the
        block must not write to the store by any other way (that write would wait for the
        lock forever); the batch refuses writes once its block has ended."""
        with self._store.engine.write() as conn:
            graph = GraphBatch(conn)
            try:
                yield graph
            finally:
                graph.closed = True

    def delete_edge(self, src_id: str, relation: str, dst_id: str, *, namespace: Namespace) -> bool:
        """Remove one edge; return whether it existed."""
        with self._store.engine.write() as conn:
            ns_id = conn.namespace_id(namespace)
            if ns_id is None:
                return False
            src, dst = _node_rowid(conn, ns_id, src_id), _node_rowid(conn, ns_id, dst_id)
            if src is None or dst is None:
                return False
            return conn.graph.remove_edge(ns_id, Edge(src, relation, dst))

    def delete_node(self, id: str, *, namespace: Namespace) -> bool:  # noqa: A002
        """Remove a node with its keys and every edge touching it; return whether it existed."""
        with self._store.engine.write() as conn:
            ns_id = conn.namespace_id(namespace)
            rowid = None if ns_id is None else _node_rowid(conn, ns_id, id)
            if ns_id is None or rowid is None:
                return False
            conn.graph.delete_node(ns_id, rowid)
        return True


@attrs.define(eq=False)
class GraphBatch:
    """Node and edge writes inside one open transaction (`GraphWriter.batch`)."""

    _conn_: Writer
    closed: bool = False
    """Set when the batch's block ends: its transaction is over, and a write is a RuntimeError."""
    _ns_ids: dict[Namespace, int] = attrs.field(factory=dict, init=False)
    """The namespaces the batch has written to, with their ids."""
    _rowids: dict[tuple[int, str], int] = attrs.field(factory=dict, init=False)
    """The nodes the batch has written or found, by (ns_id, node id): a bulk load names each
    node again in its edges, and the batch's transaction holds the write lock, so none is
    deleted meanwhile (a node not found is looked up again: it may be written next)."""

    @property
    def _conn(self) -> Writer:
        if self.closed:
            msg = "this graph batch's block has ended; open another with GraphWriter.batch()"
            raise RuntimeError(msg)
        return self._conn_

    def _namespace(self, namespace: Namespace) -> int:
        """The namespace's id, created on first use (once a batch)."""
        ns_id = self._ns_ids.get(namespace)
        if ns_id is None:
            ns_id = self._ns_ids[namespace] = self._conn.ensure_namespace(namespace)
        return ns_id

    def _rowid(self, ns_id: int, node_id: str) -> int | None:
        """The node's rowid (None: no such node), looked up once a batch once found."""
        rowid = self._rowids.get((ns_id, node_id))
        if rowid is None:
            rowid = _node_rowid(self._conn, ns_id, node_id)
            if rowid is not None:
                self._rowids[(ns_id, node_id)] = rowid
        return rowid

    def add_node(self, name: str, *, namespace: Namespace, **fields: Unpack[NodeFields]) -> str:
        """`GraphWriter.add_node` in the batch's transaction (the same keywords, `NodeFields`)."""
        conn = self._conn
        aliases, description = fields.get("aliases", ()), fields.get("description", "")
        keys, errors = _node_errors(name, aliases, description, fields.get("id"))
        created, errs = _validate.normalise_created_at(fields.get("created_at"))
        _validate.raise_if(errors + errs)
        node_id = fields.get("id") or str(uuid.uuid4())
        ns_id = self._namespace(namespace)
        rowid = self._rowid(ns_id, node_id)
        if rowid is not None and not fields.get("replace", False):
            raise ValidationError.single("id", "exists", f"node {node_id!r} already exists in {namespace}")
        values = (name, json.dumps(list(aliases), ensure_ascii=False), description)
        rowid = _written_node(conn, ns_id, rowid, (node_id, *values, created))
        self._rowids[(ns_id, node_id)] = rowid
        conn.graph.add_keys(ns_id, rowid, sorted(keys))
        return node_id

    def add_edge(
        self,
        src_id: str,
        relation: str,
        dst_id: str,
        *,
        namespace: Namespace,
        created_at: str | None = None,
    ) -> bool:
        """`GraphWriter.add_edge` in the batch's transaction."""
        conn = self._conn
        _validate.raise_if(edge_errors(src_id, relation, dst_id, created_at=created_at))
        created, _ = _validate.normalise_created_at(created_at)
        ns_id = self._namespace(namespace)
        src, dst = self._rowid(ns_id, src_id), self._rowid(ns_id, dst_id)
        missing = [
            FieldError(field=field, code="not_found", message=f"no node {value!r} in {namespace}")
            for field, value, rowid in (("src_id", src_id, src), ("dst_id", dst_id, dst))
            if rowid is None
        ]
        _validate.raise_if(missing)
        if src is None or dst is None:  # reported as missing just above
            return False
        return conn.graph.add_edge(ns_id, Edge(src, relation, dst), str(created))


def node_errors(
    name: object,
    *,
    aliases: object = (),
    description: object = "",
    id: object = None,  # noqa: A002 - the documented API name
    created_at: object = None,
) -> list[FieldError]:
    """Every problem `GraphWriter.add_node` would refuse these fields for (whether the id exists
    apart); nothing is read or written."""
    return _node_errors(name, aliases, description, id)[1] + _validate.normalise_created_at(created_at)[1]


def edge_errors(
    src_id: object, relation: object, dst_id: object, *, created_at: object = None
) -> list[FieldError]:
    """Every problem `GraphWriter.add_edge` would refuse these fields for, but whether both nodes
    exist (read when it is written); nothing is read or written."""
    errors = _validate.text_errors("relation", relation, max_chars=MAX_NAME_CHARS)
    errors += _validate.id_errors("src_id", src_id) + _validate.id_errors("dst_id", dst_id)
    if src_id == dst_id:
        errors.append(FieldError(field="dst_id", code="self_loop", message="an edge joins two nodes"))
    return errors + _validate.normalise_created_at(created_at)[1]


def _node_errors(
    name: object, aliases: object, description: object, id_: object
) -> tuple[set[str], list[FieldError]]:
    """Validate a node; return its keys (analysed name and aliases) and the errors."""
    errors = _validate.id_errors("id", id_)
    if not isinstance(description, str):
        errors.append(FieldError(field="description", code="type", message="must be a string"))
    elif description:
        errors += _validate.text_errors("description", description)
    phrases: list[tuple[str, object]] = [("name", name)]
    if isinstance(aliases, str) or not isinstance(aliases, Sequence):
        errors.append(FieldError(field="aliases", code="type", message="must be a list of names"))
    elif len(aliases) > MAX_ALIASES:
        errors.append(FieldError(field="aliases", code="out_of_range", message=f"at most {MAX_ALIASES}"))
    else:
        phrases += [(f"aliases[{i}]", a) for i, a in enumerate(aliases)]
    keys: set[str] = set()
    for field, phrase in phrases:
        errs = _validate.text_errors(field, phrase, max_chars=MAX_NAME_CHARS)
        if not errs:
            assert isinstance(phrase, str)  # noqa: S101 - checked above
            key = key_of(phrase)
            if not key:
                errs = [FieldError(field=field, code="no_terms", message="has no informative word")]
            elif len(key.split()) > MAX_KEY_TERMS:
                msg = f"at most {MAX_KEY_TERMS} informative words (put the rest in the description)"
                errs = [FieldError(field=field, code="too_many_terms", message=msg)]
            keys.add(key)
        errors += errs
    return keys, errors


def _written_node(
    conn: Writer, ns_id: int, rowid: int | None, node: tuple[str, str, str, str, str | None]
) -> int:
    """Insert a node (id, name, aliases, description, created_at), or update the node at `rowid`
    in place (its keys dropped, to be written again); return its rowid. Inside the caller's write."""
    node_id, name, aliases, description, created = node
    if rowid is None:
        return conn.graph.insert_node(ns_id, NodeRecord(0, node_id, name, aliases, description, str(created)))
    conn.graph.update_node(ns_id, rowid, name=name, aliases=aliases, description=description)
    return rowid


def _node_rowid(conn: Reader, ns_id: int, id_: str) -> int | None:
    return conn.graph.find(ns_id, id_)


# -- reading ----------------------------------------------------------------------------------


@attrs.define(eq=False)
class GraphSource(ReaderSource):
    """Nodes the task names and their neighbourhood (BFS depth <= 2), scored and hop-decayed.

    A graph fact the walk reaches is scored on the one calibrated scale when the task's gate
    is open, and on its own evidence too, the terms the task shares with the fact
    (`shared_term_logits`, as a past task is scored): "Who maintains Ledger?" gets "Ana —
    maintains → Ledger" whether or not the namespace's memories serve the task, and a task that
    only names the entity ("Deploy Ledger") does not (one shared term never clears the floor).
    A fact takes the higher of the two, times its hop decay. So the source's read joins the
    turn's gate read as the other gated sources' do, and runs there also under a closed gate
    when the task names a node (`Reference.names_nodes`).

    A typed request gets graph candidates only when it asks for `semantic` memories.
    """

    name: ClassVar[str] = "graphs"
    gated: ClassVar[bool] = True

    def _reads_closed(self, gate: Gate) -> bool:
        return gate.names_nodes

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        if request.types is not None and GRAPH_TYPE not in request.types:
            return []
        ns_id = conn.namespace_id(request.namespace)
        if ns_id is None:
            return []
        seeds = mentioned(conn, ns_id, request.task)
        if not seeds:
            return []
        scorer = self._reader.scorer(conn, ns_id, request.task, request.mode)
        if not scorer.profile.terms:
            return []
        hops, via = bfs(conn, ns_id, seeds)
        rows = conn.graph.nodes(ns_id, sorted(hops))
        nodes = {
            n.rowid: n
            for n in _validate.skip_damaged(rows, Node.from_row, table="graph_nodes", row_id=lambda r: r[1])
        }
        return self._scored(conn, scorer, Walk(nodes=nodes, hops=hops, via=via), request.limit)

    def _scored(self, conn: Reader, scorer: Scorer, walk: Walk, limit: int) -> list[Candidate]:
        """Render each node by its best-matching path, then score the best of them.

        Each node is told by its text of highest own evidence when that clears the floor (times
        its hop decay), else by its text of highest own evidence or lexical base relevance (the
        latter only when the task's gate is open). The best `limit` nodes so told get their
        calibrated score when the gate is open (in a dense mode only the first DENSE_SCORED:
        a rendered text has no stored vector and embedding it costs about 3 ms inside the
        turn's deadline) and keep their own evidence.
        """
        closed = self._gate_closed(scorer)
        grams = task_grams(scorer.query)
        told = _told(walk, grams)
        terms = [[_analysis.terms(t) for t in texts] for _, texts in told]
        keys = _named_keys(walk, grams)
        own = iter(_own_evidence(frozenset(scorer.profile.terms), [t for ts in terms for t in ts], keys))
        rendered: list[_Told] = []
        for (rowid, texts), text_terms in zip(told, terms, strict=True):
            mine = [next(own) for _ in texts]
            lexical = [0.0] * len(texts) if closed else lexical_scores(scorer, text_terms)
            both = [max(a, b) for a, b in zip(lexical, mine, strict=True)]
            decay = HOP_DECAY[walk.hops[rowid]]
            best_own = max(range(len(texts)), key=mine.__getitem__)
            clears = mine[best_own] * decay >= RECALL_MIN_SCORE
            top = best_own if clears else max(range(len(texts)), key=both.__getitem__)
            rendered.append(_Told(both[top] * decay, rowid, texts[top], mine[top]))
        rendered.sort(key=lambda r: (-r.rank, walk.hops[r.rowid], walk.nodes[r.rowid].id))
        kept = rendered[: max(limit, 0)]
        scored = [] if closed else kept[: DENSE_SCORED if scorer.mode in DENSE_MODES else len(kept)]
        batch = Batch(slot=None, rowids=[r.rowid for r in scored], texts=[r.text for r in scored])
        calibrated: list[Relevance | None] = list(score_rows(scorer, conn, batch)) if scored else []
        calibrated += [None] * (len(kept) - len(calibrated))
        return best_first(
            (
                _candidate(self.name, walk.nodes[r.rowid], r, rel, walk.hops[r.rowid])
                for r, rel in zip(kept, calibrated, strict=True)
            ),
            limit,
            self.min_score,
        )


@attrs.frozen
class _Told:
    """A node as the walk tells it: its pre-rank, rowid, text and the text's own evidence."""

    rank: float
    rowid: int
    text: str
    own: float


def _told(walk: Walk, grams: frozenset[str]) -> list[tuple[int, list[str]]]:
    """Each reached node with the texts it may be told by: the edges that reached it, and a
    node the task names by itself when only its description, or its name when the task used an
    alias, says more than the task did (otherwise it is told by the edges around it)."""
    out = []
    for rowid, node in walk.nodes.items():
        # An edge through a damaged (skipped) node cannot be rendered.
        texts = [
            render(node, walk.nodes, e)
            for e in walk.via.get(rowid, [])
            if e[0] in walk.nodes and e[2] in walk.nodes
        ]
        if walk.hops[rowid] == 0 and (node.description or named_by_alias(node, grams)):
            texts.append(render(node, walk.nodes, None))
        if texts:
            out.append((rowid, texts))
    return out


def _own_evidence(task_terms: frozenset[str], texts: list[list[str]], keys: frozenset[str]) -> list[float]:
    """The probability that the task is about each rendered text, from the terms they share,
    weighted by their rarity among the walk's texts. Each of the `keys` by which the task named
    the walk's nodes counts as one term, however many words it has, and weighs as if one text
    held it: every fact the walk renders is about a node the task names, so among them its name
    tells nothing, but it is why they are here (and one name is one piece of evidence)."""
    task = _keyed(task_terms, keys)
    logits = shared_term_logits(task, [_keyed(frozenset(t), keys) for t in texts], pinned=keys & task)
    return [sigmoid(z) for z in logits]


def _named_keys(walk: Walk, grams: frozenset[str]) -> frozenset[str]:
    """The keys (analysed names or aliases) by which the task named the walk's seeds."""
    seeds = [walk.nodes[r] for r, hop in walk.hops.items() if hop == 0 and r in walk.nodes]
    return frozenset(k for node in seeds for k in map(key_of, (node.name, *node.aliases)) if k in grams)


def _keyed(terms: frozenset[str], keys: frozenset[str]) -> frozenset[str]:
    """Terms with each key whose every word they hold counted as one term, the key itself."""
    held = {k for k in keys if set(k.split()) <= terms}
    return (terms - {w for k in held for w in k.split()}) | held


def _candidate(source: str, node: Node, told: _Told, rel: Relevance | None, hop: int) -> Candidate:
    """A node's candidate: the higher of its calibrated score (`rel`, None when the gate was
    closed; its band decayed by the hops from the entity the task names) and its own evidence
    (decayed alike; it has no gate or band)."""
    decay = HOP_DECAY[hop]
    own = min(max(told.own * decay, 0.0), 1.0)
    if rel is None or own > rel.qpp * rel.band * decay:
        score, qpp, band = own, None, None
    else:
        band = rel.band * decay
        score, qpp = min(max(rel.qpp * band, 0.0), 1.0), rel.qpp
    return Candidate(
        entry_id=f"graph:{node.id}",
        source=source,
        score=score,
        qpp=qpp,
        band=band,
        text=told.text,
        block="memory",
        memory_type=GRAPH_TYPE,
        created_at=node.created_at,
        metadata={"node_id": node.id, "name": node.name, "hop": hop},
    )
