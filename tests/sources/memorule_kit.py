"""What the memorule tests share: a namespace, a writer, a topic, and helpers to write and look."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from broker import Namespace, SessionContext, ValidationError
from sources import MemoryStore, WriterSession, remember, semantic_recall

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

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


@contextmanager
def open_store(tmp_path: Path) -> Iterator[MemoryStore]:
    """Open a lexical store (no model) with unrelated notes, so term statistics are realistic."""
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as s:
        fill(s, NS)
        yield s


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
    """The one integer a query returns."""
    with store.db.read() as conn:
        return int(conn.execute(sql).fetchone()[0])


def field_codes(exc: pytest.ExceptionInfo[ValidationError]) -> set[tuple[str, str]]:
    """The (field, code) pairs of a ValidationError."""
    return {(e.field, e.code) for e in exc.value.errors}


def recall_ids(store: MemoryStore, context: SessionContext, ns: Namespace = NS) -> list[str]:
    """The ids of the memorules recalled for QUERY in `context`, in ranking order."""
    return [
        m.id for m in semantic_recall(store, QUERY, namespace=ns, source_type="memorule", context=context)
    ]


def fts_consistent(store: MemoryStore) -> bool:
    """Whether every namespace's FTS index passes its check and holds one row per entry."""
    with store.db.write() as conn:
        for (ns_id,) in conn.execute("SELECT ns_id FROM namespaces").fetchall():
            table = f"fts_{int(ns_id)}"
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            fts_rows = conn.execute(f"SELECT count(*) FROM {table} WHERE (rowid & 3) = 0").fetchone()[0]
            entries = conn.execute("SELECT count(*) FROM entries WHERE ns_id = ?", (ns_id,)).fetchone()[0]
            if fts_rows != entries:
                return False
    return True


def damage_state(store: MemoryStore, rule_id: str, version: int, applies_to: str = "{oops") -> None:
    """Overwrite one stored state's applies_to with text that is not a JSON object."""
    with store.db.write() as conn:
        rowids = [
            r[0]
            for r in conn.execute(
                "SELECT s.rowid FROM memorule_states s JOIN entries e ON e.rowid = s.entry_rowid "
                "WHERE e.id = ? ORDER BY s.rowid",
                (rule_id,),
            )
        ]
        conn.execute(
            "UPDATE memorule_states SET applies_to = ? WHERE rowid = ?", (applies_to, rowids[version - 1])
        )
