"""What the memorule tests share: a namespace, a writer, a topic, and helpers to write and look."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from store_kit import StoreOpener, indexed, sql_rows, text_index_ok

from broker import Namespace, SessionContext, ValidationError
from sources import MemoryStore, WriterSession, remember, semantic_recall
from sources.storage._engine import CORPUS_ENTRIES

if TYPE_CHECKING:
    import pytest

NS = Namespace(tenant_id="acme", project_id="web")
SESSION = WriterSession(session_id="sess-1", persona="donna")
TOPIC = "Deploy releases through the staging checklist before production rollout."
QUERY = "deploy release staging checklist production rollout"
_FILLER_TEXT = (
    "lunch sandwich tomato soup report friday alice blue theme editor office plant water bob "
    "lisbon conference printer floor jammed cake parking garage carol pixel sync thursday "
    "morning weather river mountain bicycle guitar novel garden kitchen piano train ticket"
)
_FILLER_WORDS = tuple(_FILLER_TEXT.split())


def open_store(make_store: StoreOpener) -> MemoryStore:
    """A lexical store (no model) on the engine under test, with unrelated notes in NS, so
    term statistics are realistic."""
    s = make_store(mode="lexical")
    fill(s, NS)
    return s


def fill(store: MemoryStore, ns: Namespace, n: int = 60) -> None:
    """Write `n` notes of unrelated words into `ns`."""
    words = _FILLER_WORDS
    for i in range(n):
        text = " ".join(words[(i * 7 + j * 5) % len(words)] for j in range(6))
        store.add_entry(text, namespace=ns)


def write_rule(store: MemoryStore, ns: Namespace = NS, **kw: Any) -> str:
    """Write a valid memorule on TOPIC (fields overridden by `kw`); its id."""
    args: dict[str, Any] = {
        "memorule_kind": "behavioral_rule",
        "subject": "Staging first",
        "body": TOPIC,
        "applies_to": {"scope": "project"},
        "session": SESSION,
    }
    args.update(kw)
    return remember(store, kind="memorule", namespace=ns, **args)


def count(store: MemoryStore, sql: str) -> int:
    """The one integer a query returns (on either engine, past the tenant wall)."""
    return int(sql_rows(store, sql)[0][0])


def field_codes(exc: pytest.ExceptionInfo[ValidationError]) -> set[tuple[str, str]]:
    """The (field, code) pairs of a ValidationError."""
    return {(e.field, e.code) for e in exc.value.errors}


def recall_ids(store: MemoryStore, context: SessionContext, ns: Namespace = NS) -> list[str]:
    """The ids of the memorules recalled for QUERY in `context`, in ranking order."""
    return [
        m.id for m in semantic_recall(store, QUERY, namespace=ns, source_type="memorule", context=context)
    ]


def fts_consistent(store: MemoryStore) -> bool:
    """Whether every namespace's text index passes its check and holds one row per entry."""
    if not text_index_ok(store):
        return False
    for ns_id, entries in sql_rows(
        store, "SELECT n.ns_id, (SELECT count(*) FROM entries e WHERE e.ns_id = n.ns_id) FROM namespaces n"
    ):
        if indexed(store, ns_id, CORPUS_ENTRIES) != entries:
            return False
    return True


def damage_state(store: MemoryStore, rule_id: str, version: int, applies_to: str = "{oops") -> None:
    """Overwrite one stored state's applies_to with text that is not a JSON object."""
    rowids = [
        r[0]
        for r in sql_rows(
            store,
            "SELECT s.rowid FROM memorule_states s JOIN entries e ON e.rowid = s.entry_rowid "
            "WHERE e.id = ? ORDER BY s.rowid",
            (rule_id,),
        )
    ]
    sql_rows(
        store,
        "UPDATE memorule_states SET applies_to = ? WHERE rowid = ?",
        (applies_to, rowids[version - 1]),
        write=True,
    )
