"""A LangGraph store over the broker's memory (extra `[langgraph]`).

    graph = builder.compile(store=BrokerStore(MemoryStore.open("memory.db")))

A LangGraph namespace is `(tenant, project)`: the two labels are the broker's `Namespace`,
a hard partition. An item is one memory whose id is the item's key: its text is
`value[text_field]` (the whole value as JSON when that is not a string) and the value itself
travels in the memory's metadata, so `get` returns exactly what `put` wrote; memories written
by other means (the CLI, `remember`) read back as `{"text", "kind", "memory_type"}`.

`search` with a query is the broker's calibrated recall: only memories at or above the one
floor come back, best first, each with its probability of relevance as the score, and a
query nothing is relevant to gets nothing. Without a query it lists the namespace's items,
oldest first. A prefix shorter than two labels searches every namespace under it, the
scores being on one scale. `filter` compares top-level value keys for equality. TTLs are not
supported. The SQLite calls are blocking: the async variants run them in a worker thread.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from broker import Namespace

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from sources import Memory, MemoryStore

_META = "langgraph"
_DEPTH = 2


class BrokerStore(BaseStore):
    """LangGraph's `BaseStore` on a `sources.MemoryStore`; the caller opens and closes the store."""

    def __init__(self, store: MemoryStore, *, text_field: str = "text") -> None:
        self._store = store
        self._text_field = text_field

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; one result each (None for a put)."""
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread."""
        ops = list(ops)
        return await anyio.to_thread.run_sync(self.batch, ops)

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        return self._list_namespaces(op)

    def _get(self, op: GetOp) -> Item | None:
        memory = self._store.get(op.key, namespace=_namespace(op.namespace))
        return None if memory is None else _item(memory)

    def _put(self, op: PutOp) -> None:
        ns = _namespace(op.namespace)
        if op.value is None:
            self._store.delete(op.key, namespace=ns)
            return
        existing = self._store.get(op.key, namespace=ns)
        text = op.value.get(self._text_field)
        now = _now()
        self._store.add_entry(
            text
            if isinstance(text, str) and text.strip()
            else json.dumps(op.value, sort_keys=True, default=str),
            namespace=ns,
            id=op.key,
            created_at=existing.created_at if existing is not None else now,
            metadata={_META: {"value": op.value, "updated_at": now}},
            replace=existing is not None,
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        namespaces = self._namespaces_under(op.namespace_prefix)
        wanted = op.offset + op.limit
        if op.query:
            hits: list[tuple[float | None, Memory]] = [
                (r.score, r.memory)
                for ns in namespaces
                for r in self._store.recall(op.query, namespace=ns, limit=max(wanted, 1))
            ]
            hits.sort(key=lambda sm: -(sm[0] or 0.0))
        else:
            hits = [
                (None, m) for ns in namespaces for m in self._store.list_entries(namespace=ns, limit=10_000)
            ]
        items = [_search_item(m, score) for score, m in hits]
        return [i for i in items if _matches(i.value, op.filter)][op.offset : wanted]

    def _namespaces_under(self, prefix: tuple[str, ...]) -> list[Namespace]:
        if len(prefix) == _DEPTH:
            return [_namespace(prefix)]
        if len(prefix) > _DEPTH:
            raise _invalid(prefix)
        return [
            Namespace(tenant_id=t, project_id=p)
            for t, p in self._all_namespaces()
            if (t, p)[: len(prefix)] == prefix
        ]

    def _all_namespaces(self) -> list[tuple[str, str]]:
        rows = self._store.stats()["by_namespace"]
        return sorted({(r["tenant"], r["project"]) for r in rows})

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = [
            ns for ns in self._all_namespaces() if all(_condition(ns, c) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            found = list(dict.fromkeys(ns[: op.max_depth] for ns in found))
        return found[op.offset : op.offset + op.limit]


def _namespace(labels: tuple[str, ...]) -> Namespace:
    if len(labels) != _DEPTH:
        raise _invalid(labels)
    try:
        return Namespace(tenant_id=labels[0], project_id=labels[1])
    except ValueError as exc:
        raise InvalidNamespaceError(f"{labels}: {exc}") from exc


def _invalid(labels: tuple[str, ...]) -> InvalidNamespaceError:
    return InvalidNamespaceError(f"a broker namespace is (tenant, project), got {labels}")


def _item(memory: Memory) -> Item:
    meta = memory.metadata.get(_META)
    if isinstance(meta, dict) and isinstance(meta.get("value"), dict):
        value, updated = meta["value"], meta.get("updated_at", memory.created_at)
    else:
        value = {"text": memory.text, "kind": memory.kind, "memory_type": memory.memory_type}
        updated = memory.created_at
    return Item(
        namespace=(memory.namespace.tenant_id, memory.namespace.project_id),
        key=memory.id,
        value=value,
        created_at=_time(memory.created_at),
        updated_at=_time(updated),
    )


def _search_item(memory: Memory, score: float | None) -> SearchItem:
    item = _item(memory)
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score=score)


def _matches(value: Mapping[str, Any], filter_: Mapping[str, Any] | None) -> bool:
    return all(value.get(k) == v for k, v in (filter_ or {}).items())


def _condition(ns: tuple[str, ...], condition: MatchCondition) -> bool:
    path = condition.path
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if condition.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _time(text: str) -> datetime:
    stamp = datetime.fromisoformat(text)
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)
