"""End-to-end smoke of a memorule: CLI write, API recall, turn injection, trace and audit.

The rule is written through the CLI, recalled through the API, injected into an assembled
turn (its id in the trace), and found again as an audit event.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

from broker import Namespace, SessionContext, Turn, open_broker, open_selector
from sources import MemorulesSource, MemoryStore, audit_events, default_sources, semantic_recall
from sources._store_reader import StoreReader
from sources._tasks import SqliteTaskRepository

if TYPE_CHECKING:
    from pathlib import Path

NS = Namespace(tenant_id="acme", project_id="web")
BODY = "Every database migration must ship with a tested rollback script."
TASK = "Ship the database migration with a tested rollback script"
FILLER = [
    "Standup moved to ten because of the dentist appointment",
    "Priya prefers short pull requests with screenshots",
    "Our office plants need watering every Friday",
    "The team offsite will be in Lisbon in spring",
    "Invoices are sent on the first business day of the month",
    "Carol adopted a cat named Pixel last winter",
]


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "context_broker",
            "--db",
            str(db),
            "--tenant",
            "acme",
            "--project",
            "web",
            *args,
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
        check=False,
    )


async def test_cli_write_api_recall_turn_injection_and_audit(tmp_path: Path) -> None:
    """The rule written by the CLI is recalled, injected in a memorules block, traced, audited."""
    db = tmp_path / "e2e.db"
    with MemoryStore.open(db, mode="lexical") as store:
        for text in FILLER:
            store.add_entry(text, namespace=NS)
    written = cli(
        db,
        "remember",
        "--kind",
        "memorule",
        "--memorule-kind",
        "convention",
        "--subject",
        "Migrations need rollbacks",
        BODY,
        "--applies-to",
        "persona=donna",
        "--applies-to",
        "scope=project",
        "--confidence",
        "observed",
        "--evidence-signal-id",
        "sig-94",
        "--session-id",
        "sess-1",
        "--persona",
        "donna",
    )
    assert written.returncode == 0, written.stderr
    rid = written.stdout.strip()
    ctx = SessionContext(persona="donna", scope="project")

    with MemoryStore.open(db, mode="lexical") as store:
        (match,) = semantic_recall(store, TASK, namespace=NS, source_type="memorule", context=ctx)
        assert (match.id, match.memorule_kind, match.confidence, match.evidence_signal_id) == (
            rid,
            "convention",
            "observed",
            "sig-94",
        )

        repo = SqliteTaskRepository.from_store(store)
        task_id = repo.create_task(TASK, namespace=NS)
        sources = default_sources(store)
        if "memorules" not in {s.name for s in sources}:  # until the default wiring includes it
            sources = [MemorulesSource(StoreReader(store=store)), *sources]
        async with (
            # Not a deadline test: a deadline no loaded machine misses.
            open_selector(sources, deadline=30.0) as selector,
            open_broker(selector=selector, tasks=repo, conversations=repo) as broker,
        ):
            context = await broker.assemble(
                Turn(task_id=task_id, namespace=NS, window=8000, input_budget=4000, context=ctx)
            )
        rules = [b for b in context.blocks if b.name == "memorules"]
        assert [b.entry_id for b in rules] == [rid]
        assert BODY in rules[0].text
        assert context.trace["memorule_ids"] == [rid]
        assert context.blocks[-1].name == "user"

        (event,) = audit_events(store)
    assert (event.memorule_id, event.action, event.written_by_persona, event.evidence_signal_id) == (
        rid,
        "create",
        "donna",
        "sig-94",
    )
    audited = json.loads(cli(db, "audit", "--json").stdout)
    assert [(e["memorule_id"], e["action"]) for e in audited] == [(rid, "create")]
