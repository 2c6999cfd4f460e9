"""The entity graph as a turn reads it: the nodes a task names, the breadth-first walk from
them, and a node rendered as text.

Finding the entry points is lexical, no NER model: a node's keys are the analysed terms of
its name and of each alias (`key_of`), and the task's analysed terms are matched as n-grams
(n = 1..`MAX_KEY_TERMS`). From there a read-only BFS follows edges in both directions, at most
`MAX_DEPTH` hops, under a node budget. The graph source (`sources._graphs`) scores what the walk
reached; the namespace's reference (`sources.relevance._reference`) counts the nodes a task names among
its evidence (`mentioned_texts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from . import _analysis, _validate

if TYPE_CHECKING:
    from ._engine import Reader
    from ._engine_corpora import Edge

MAX_KEY_TERMS = 4
"""Informative words a name or alias may have: the task is matched as n-grams up to this."""
MAX_DEPTH = 2
"""Edges the BFS follows from a mentioned node."""
NODE_BUDGET = 48
"""Nodes one BFS may reach (mentioned nodes included)."""
_EDGE_SCAN = 2000  # edges read per hop at most (a hub never stalls a turn)
_VIA_MAX = 8  # edges kept per reached node to render it by
_MAX_TASK_TERMS = 256  # task terms turned into n-grams


@attrs.frozen(kw_only=True)
class Node:
    """A graph node as read: its rowid, id, name, aliases, description and when it was written."""

    rowid: int
    id: str
    name: str
    aliases: tuple[str, ...]
    description: str
    created_at: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Node:
        """A node of its row (rowid, id, name, aliases JSON, description, created_at)."""
        return cls(
            rowid=int(row[0]),
            id=row[1],
            name=row[2],
            aliases=tuple(_validate.decode_json(row[3], column="aliases", default="[]")),
            description=row[4],
            created_at=row[5],
        )


def key_of(phrase: str) -> str:
    """Return the key a phrase is stored and matched under: its analysed terms."""
    return " ".join(_analysis.terms(phrase))


REFERENCE_NODES = 5
"""Nodes a task names that the namespace's reference counts among its evidence."""


def mentioned_texts(conn: Reader, ns_id: int, task: str) -> list[str]:
    """The texts (name: description) of the first nodes the task names, as evidence the
    namespace holds for it (`sources.relevance._reference`)."""
    rowids = mentioned(conn, ns_id, task)[:REFERENCE_NODES]
    if not rowids:
        return []
    rows = conn.graph.nodes(ns_id, rowids)
    built = _validate.skip_damaged(rows, Node.from_row, table="graph_nodes", row_id=lambda r: r[1])
    nodes = {n.rowid: n for n in built}
    return [render(n, nodes, None) for n in nodes.values()]


def mentioned(conn: Reader, ns_id: int, task: str) -> list[int]:
    """Rowids of the nodes whose name or alias occurs in the task (as analysed n-grams)."""
    return conn.graph.keyed(ns_id, sorted(task_grams(task)))[:NODE_BUDGET]


def task_grams(task: str) -> frozenset[str]:
    """The task's analysed n-grams (n = 1..`MAX_KEY_TERMS`): the keys a node is named by."""
    seq = _analysis.terms(task)[:_MAX_TASK_TERMS]
    return frozenset(
        " ".join(seq[i : i + n]) for n in range(1, MAX_KEY_TERMS + 1) for i in range(len(seq) - n + 1)
    )


def named_by_alias(node: Node, grams: frozenset[str]) -> bool:
    """Whether the task names the node by an alias and not by its name: telling the node by
    itself ("search service (also search-api)") then says which entity the task means."""
    return key_of(node.name) not in grams and any(key_of(a) in grams for a in node.aliases)


def bfs(conn: Reader, ns_id: int, seeds: list[int]) -> tuple[dict[int, int], dict[int, list[Edge]]]:
    """Walk edges breadth-first in both directions, at most MAX_DEPTH hops.

    Returns the hop of each reached node, and the edges it may be rendered by: those from the
    previous hop that reach it, and those joining it to another node of its own hop (two
    nodes the task both mentions are best told by the edge between them).
    """
    hops = dict.fromkeys(seeds, 0)
    via: dict[int, list[Edge]] = {}

    def keep(node: int, edge: Edge) -> None:
        paths = via.setdefault(node, [])
        if len(paths) < _VIA_MAX and edge not in paths:
            paths.append(edge)

    frontier = list(seeds)
    for hop in range(1, MAX_DEPTH + 1):
        if not frontier:
            break
        here = set(frontier)
        frontier = []
        for edge in _edges(conn, ns_id, sorted(here)):
            src, _, dst = edge
            if src in here and dst in here:
                keep(src, edge)
                keep(dst, edge)
                continue
            other = dst if src in here else src
            if other not in hops:
                if len(hops) >= NODE_BUDGET:
                    continue
                hops[other] = hop
                frontier.append(other)
            if hops[other] == hop:
                keep(other, edge)
    return hops, via


def _edges(conn: Reader, ns_id: int, rowids: list[int]) -> list[Edge]:
    return conn.graph.edges(ns_id, rowids, limit=_EDGE_SCAN)


@attrs.frozen(kw_only=True)
class Walk:
    """What the breadth-first walk from the task's nodes reached: the nodes by rowid, their
    hops from a mentioned node, and the edges each was reached through."""

    nodes: dict[int, Node]
    hops: dict[int, int]
    via: dict[int, list[Edge]]


def render(node: Node, nodes: dict[int, Node], edge: Edge | None) -> str:
    """Render a node as text: by an edge that reaches it, or by itself (name, aliases).

    The description is the node's own: after the edge when the node is its target
    ("Caroline — attends → LGBTQ support group: meets on Tuesdays"), after its name otherwise.
    """
    if edge is None:
        head = node.name + (f" (also {', '.join(node.aliases)})" if node.aliases else "")
        return f"{head}: {node.description}" if node.description else head
    src, rel, dst = edge
    head = f"{nodes[src].name} — {rel} → {nodes[dst].name}"
    if not node.description:
        return head
    if dst == node.rowid:
        return f"{head}: {node.description}"
    return f"{head}; {node.name}: {node.description}"
