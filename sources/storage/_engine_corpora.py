"""Each corpus's rows behind the storage engine (`sources.storage._engine`): entries, documents
(facts, knowledge), neurons, the graph, memorules, tasks.

A `Reader` gives the `*Reads` protocols, a `Writer` the `*Writes` (which read too, inside
the transaction). Every method names its namespace (`ns_id`), and rows come back as the
tuples below (NamedTuples: a turn reads hundreds, and the corpus modules build their own
values from them). Indexing a row's text (`Writer.index_document`) and its vector
(`Writer.store_vectors`) are the caller's, so a corpus chooses what is indexed (a neuron:
its text and trigger phrases); deletes reach every index and side table themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from broker import Namespace

    from ._entries import EntryRow


class EntryRecord(NamedTuple):
    """An entry row; `terms` are its indexed terms when the read says so, else None."""

    rowid: int
    id: str
    tenant_id: str
    project_id: str
    kind: str
    memory_type: str | None
    text: str
    created_at: str
    importance: float
    metadata: str
    terms: tuple[str, ...] | None = None


class NeuronRecord(NamedTuple):
    """A neuron's entry row."""

    rowid: int
    id: str
    memory_type: str | None
    text: str
    created_at: str
    importance: float
    metadata: str


class NodeRecord(NamedTuple):
    """A graph node; `aliases` is the JSON array string as written."""

    rowid: int
    id: str
    name: str
    aliases: str
    description: str
    created_at: str


class Edge(NamedTuple):
    """A graph edge between two node rowids of one namespace."""

    src: int
    relation: str
    dst: int


class StateRecord(NamedTuple):
    """One memorule state; `applies_to` is the JSON object string as written."""

    memorule_kind: str
    subject: str
    body: str
    applies_to: str
    evidence_signal_id: str | None
    confidence: str
    written_by_session_id: str | None
    written_by_persona: str | None
    written_at: str


class CurrentRecord(NamedTuple):
    """A memorule's entry row joined with its newest state, and its count of states."""

    rowid: int
    id: str
    ns_id: int
    tenant_id: str
    project_id: str
    memory_type: str | None
    text: str
    created_at: str
    state_rowid: int
    memorule_kind: str
    subject: str
    body: str
    applies_to: str
    evidence_signal_id: str | None
    confidence: str
    written_by_session_id: str | None
    written_by_persona: str | None
    written_at: str
    versions: int


class AuditRecord(NamedTuple):
    """One memorule audit event (they outlive the memorule)."""

    memorule_id: str
    action: str
    written_by_session_id: str | None
    written_by_persona: str | None
    evidence_signal_id: str | None
    written_at: str
    tenant_id: str
    project_id: str


class TaskRecord(NamedTuple):
    """A task row."""

    task_id: str
    description: str
    status: str
    created_at: str
    updated_at: str


class TurnRecord(NamedTuple):
    """A conversation turn of a task."""

    task_id: str
    role: str
    text: str
    created_at: str


# -- entries ----------------------------------------------------------------------------------


class EntryReads(Protocol):
    """The `entries` rows of a namespace (every kind: note, neuron, memorule, ...)."""

    def find(self, ns_id: int, id: str) -> tuple[int, str] | None:  # noqa: A002
        """(rowid, kind) of the entry `id`, or None."""
        ...

    def find_many(self, ns_id: int, ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """(rowid, kind) of each entry among `ids` the namespace holds (any number of ids)."""
        ...

    def by_id(self, namespace: Namespace, id: str) -> EntryRecord | None:  # noqa: A002
        """The entry `id` of the namespace (terms None), or None."""
        ...

    def page(self, namespace: Namespace, *, limit: int, offset: int) -> list[EntryRecord]:
        """Entries ordered by (created_at, id), `limit` from `offset` (terms None)."""
        ...

    def texts(self, ns_id: int, ids: Sequence[str]) -> dict[str, str]:
        """The text of each entry among `ids` (any number of ids)."""
        ...

    def rows(self, ns_id: int, rowids: Sequence[int]) -> list[EntryRecord]:
        """The entries of some rowids, with their indexed terms (None when not indexed);
        any order, absent rowids left out."""
        ...

    def lexical(
        self, ns_id: int, terms: Sequence[str], *, types: Sequence[str] | None, limit: int
    ) -> list[EntryRecord]:
        """`Reader.lexical_candidates` of the entries corpus restricted, before the limit,
        to entries whose memory type is in `types` or unclassified (None: every entry);
        with their indexed terms, in rank order (then rowid)."""
        ...

    def typed(self, ns_id: int, rowids: Sequence[int], types: Sequence[str]) -> set[int]:
        """The rowids among `rowids` whose memory type is in `types` or unclassified (added
        19:25 UTC; for reading down an in-memory ranking with a typed filter)."""
        ...

    def memory_types(self, ns_id: int, rowids: Sequence[int] | None) -> dict[int, str | None]:
        """The memory type (None: unclassified) of each entry of the namespace among `rowids`,
        or of every entry (None); absent rowids left out. For the in-memory text index's
        typed filter."""
        ...

    def episodic_turns(self, ns_id: int, rowids: Sequence[int]) -> dict[int, bool]:
        """Of the namespace's entries among `rowids`, the conversation's turns (episodic entries
        that are messages or open with their speaker's name: `sources.storage._entries.is_turn`,
        which reads the first `TURN_HEAD_CHARS` characters), each with whether its text asks
        a question (holds a '?'); the others left out. For a turn read in its context
        (`sources.relevance._turn_context`)."""
        ...


class EntryWrites(EntryReads, Protocol):
    """Entry writes, inside the caller's transaction."""

    def insert(self, ns_id: int, namespace: Namespace, row: EntryRow) -> int:
        """Insert an entry (its id must be new in the namespace); its rowid. Not indexed."""
        ...

    def insert_many(self, ns_id: int, namespace: Namespace, rows: Sequence[EntryRow]) -> list[int]:
        """Insert entries (ids new in the namespace and distinct); their rowids, in order."""
        ...

    def update_text(self, ns_id: int, rowid: int, *, text: str, metadata: str) -> None:
        """Set an entry's text and metadata (the caller re-indexes and re-embeds)."""
        ...

    def delete(self, ns_id: int, rowid: int) -> None:
        """Delete an entry from every index and side table: its index terms and statistics,
        its vector (a tombstone), its neuron triggers, its memorule states (the memorule
        audit events stay), then the row."""
        ...


# -- documents (facts, knowledge) ------------------------------------------------------------

DOC_TABLES: Mapping[str, tuple[int, tuple[str, ...]]] = {
    "facts": (1, ("subject", "predicate", "object", "text", "created_at", "metadata")),
    "knowledge": (2, ("text", "provenance", "created_at", "metadata")),
}
"""Each document table: its corpus and its columns besides rowid, id and ns_id (all text;
`metadata` and `provenance` hold JSON strings)."""


class DocReads(Protocol):
    """Rows of the document tables (`DOC_TABLES`); table and column names are the project's."""

    def find(self, table: str, ns_id: int, id: str) -> int | None:  # noqa: A002
        """The rowid of document `id`, or None."""
        ...

    def find_many(self, table: str, ns_id: int, ids: Sequence[str]) -> dict[str, int]:
        """The rowid of each document among `ids` the namespace holds (any number of ids)."""
        ...

    def rows(
        self, table: str, ns_id: int, rowids: Sequence[int], columns: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        """(rowid, id, *columns) of some documents; any order, absent rowids left out."""
        ...


class DocWrites(DocReads, Protocol):
    """Document writes, inside the caller's transaction."""

    def insert(self, table: str, ns_id: int, values: Mapping[str, Any]) -> int:
        """Insert a document (`values`: `id` and columns of the table); its rowid. Not indexed."""
        ...

    def insert_many(self, table: str, ns_id: int, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """Insert documents (each as `insert`'s `values`, all with the same columns; ids new
        and distinct); their rowids, in order. Not indexed."""
        ...

    def delete(self, table: str, ns_id: int, rowid: int) -> None:
        """Delete a document with its index terms, statistics and vector (a tombstone)."""
        ...


# -- neurons ---------------------------------------------------------------------------------


class NeuronReads(Protocol):
    """Neurons: entries of kind 'neuron' and their trigger terms."""

    def find(self, ns_id: int, id: str) -> int | None:  # noqa: A002
        """The rowid of neuron `id` (an entry of another kind: None)."""
        ...

    def matching(self, ns_id: int, terms: Sequence[str]) -> list[tuple[int, str]]:
        """Distinct (neuron rowid, term) pairs whose trigger term is among `terms`."""
        ...

    def triggers(self, ns_id: int, rowids: Sequence[int]) -> list[tuple[int, str]]:
        """(neuron rowid, term) of every trigger term of some neurons, in insertion order."""
        ...

    def rows(self, ns_id: int, rowids: Sequence[int], types: Sequence[str] | None) -> list[NeuronRecord]:
        """Neuron rows of some rowids (typed: memory type in `types` or unclassified), by rowid."""
        ...


class NeuronWrites(NeuronReads, Protocol):
    """Neuron writes (the entry itself: `EntryWrites.insert` with kind 'neuron')."""

    def add_triggers(self, ns_id: int, rowid: int, terms: Sequence[str]) -> None:
        """Record a neuron's trigger terms (analysed, distinct, in order)."""
        ...


# -- the graph -------------------------------------------------------------------------------


class GraphReads(Protocol):
    """The entity graph: nodes, their lookup keys, typed edges."""

    def find(self, ns_id: int, id: str) -> int | None:  # noqa: A002
        """The rowid of node `id`, or None."""
        ...

    def nodes(self, ns_id: int, rowids: Sequence[int]) -> list[NodeRecord]:
        """Nodes of some rowids; any order, absent rowids left out."""
        ...

    def keyed(self, ns_id: int, keys: Sequence[str]) -> list[int]:
        """Rowids of the nodes having any of `keys`, distinct, ascending."""
        ...

    def edges(self, ns_id: int, rowids: Sequence[int], *, limit: int) -> list[Edge]:
        """Edges touching any of `rowids` (either end), by edge insertion order, at most
        `limit` for every 500 rowids asked (callers ask at most 48)."""
        ...


class GraphWrites(GraphReads, Protocol):
    """Graph writes, inside the caller's transaction."""

    def insert_node(self, ns_id: int, node: NodeRecord) -> int:
        """Insert a node (`node.rowid` is ignored); its rowid."""
        ...

    def update_node(self, ns_id: int, rowid: int, *, name: str, aliases: str, description: str) -> None:
        """Rewrite a node's name, aliases and description and drop its keys (edges stay)."""
        ...

    def add_keys(self, ns_id: int, rowid: int, keys: Sequence[str]) -> None:
        """Add lookup keys of a node (distinct)."""
        ...

    def add_edge(self, ns_id: int, edge: Edge, created_at: str) -> bool:
        """Add an edge; False (nothing written) if that (src, dst, relation) exists."""
        ...

    def remove_edge(self, ns_id: int, edge: Edge) -> bool:
        """Remove an edge; whether it existed."""
        ...

    def delete_node(self, ns_id: int, rowid: int) -> None:
        """Delete a node with its keys and every edge touching it."""
        ...


# -- memorules -------------------------------------------------------------------------------


class MemoruleReads(Protocol):
    """Memorules: entries of kind 'memorule', their versioned states and audit events."""

    def current(self, ns_id: int, id: str) -> CurrentRecord | None:  # noqa: A002
        """The memorule `id` with its newest state, or None."""
        ...

    def history(self, ns_id: int, id: str) -> list[StateRecord]:  # noqa: A002
        """Every state of the memorule `id`, oldest first."""
        ...

    def audit(self, *, since: str | None, tenant_id: str | None) -> list[AuditRecord]:
        """Audit events in commit order, optionally from `since` (inclusive, ISO-8601 string
        comparison) and of one tenant."""
        ...

    def count(self, ns_id: int) -> int:
        """How many memorules the namespace holds (an index range: `entries (ns_id, kind)`)."""
        ...

    def other_namespaces(self, namespace: Namespace) -> list[int]:
        """Ids of the tenant's other projects that hold any memorule, ascending."""
        ...

    def lexical(
        self, ns_id: int, terms: Sequence[str], *, limit: int, tenant_wide: bool
    ) -> list[CurrentRecord]:
        """The namespace's memorules among the entries' lexical candidates for `terms` (the
        filter applied before the limit), in rank order then rowid; with `tenant_wide`, only
        those whose current `applies_to` is a JSON object with "scope" "global" or "org"
        (an undecodable one never matches)."""
        ...

    def among(self, ns_id: int, rowids: Sequence[int]) -> list[CurrentRecord]:
        """The namespace's memorules among the entries `rowids` (a dense retrieval's nearest),
        each once, in the order of `rowids`."""
        ...


class MemoruleWrites(MemoruleReads, Protocol):
    """Memorule writes: the entry is `EntryWrites`'; a delete is `EntryWrites.delete`."""

    def append_state(self, entry_rowid: int, state: StateRecord) -> None:
        """Append a state (the newest is current)."""
        ...

    def append_audit(self, event: AuditRecord) -> None:
        """Append an audit event, in commit order."""
        ...


# -- tasks -----------------------------------------------------------------------------------


class TaskReads(Protocol):
    """Tasks and their conversation turns."""

    def get(self, ns_id: int, task_id: str) -> TaskRecord | None:
        """The task, or None."""
        ...

    def completed(self, ns_id: int, *, limit: int) -> list[TaskRecord]:
        """Completed tasks, by updated_at descending then task_id, at most `limit`."""
        ...

    def turns(self, ns_id: int, task_id: str, *, role: str | None = None) -> list[TurnRecord]:
        """A task's turns (of one role, or all), in insertion order."""
        ...


class TaskWrites(TaskReads, Protocol):
    """Task writes, inside the caller's transaction."""

    def create(self, ns_id: int, task: TaskRecord) -> None:
        """Insert a task (its id must be new in the namespace)."""
        ...

    def set_status(self, ns_id: int, task_id: str, *, status: str, at: str) -> bool:
        """Set a task's status and updated_at; whether it exists."""
        ...

    def append_turn(self, ns_id: int, turn: TurnRecord) -> None:
        """Append a turn and set its task's updated_at to the turn's created_at."""
        ...

    def delete(self, ns_id: int, task_id: str) -> bool:
        """Delete a task and its turns; whether it existed."""
        ...
