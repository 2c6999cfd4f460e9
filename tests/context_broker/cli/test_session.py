"""The session context on the command line (`--persona`, `--surface`, `--specialization` on
`select`, `recall` and `demo`), `recall --source-type`, and issue 19's Friday-deploy scenario."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from cli_subprocess import UNRACED

from context_broker.wiring import ENV_PERSONA

if TYPE_CHECKING:
    from pathlib import Path

FRIDAY = "Can we deploy to production on Friday afternoon?"
OBSERVED = "Never deploy to production on a Friday afternoon; wait for Monday."
ASSERTED = "We can deploy to production on a Friday afternoon when a second approver agrees."
RELEASE = "Prepare the Lighthouse release checklist and the release notes"


@pytest.fixture(autouse=True)
def _no_persona_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_PERSONA, raising=False)


def _rule(cli, db: Path, rule_id: str, body: str, *flags: str) -> None:
    ran = cli(
        "--db",
        str(db),
        "remember",
        "--kind",
        "memorule",
        "--memorule-kind",
        "behavioral_rule",
        "--subject",
        "Deploy rule",
        body,
        "--id",
        rule_id,
        "--persona",
        "donna",
        *flags,
    )
    assert ran.status == 0, ran


def _ids(ran) -> list[str]:
    assert ran.status == 0, ran
    return [b["entry_id"] for b in json.loads(ran.out)["blocks"]]


def test_issue_19_select_injects_the_observed_rule_under_budget_1(tmp_path: Path, cli) -> None:
    """An older observed rule outranks a newer, better-scored asserted one: `select --budget 1`
    injects the observed rule (the issue's CLI reproduction, default recall mode)."""
    db = tmp_path / "m.db"
    _rule(cli, db, "observed", OBSERVED, "--applies-to", "scope=global", "--confidence", "observed")
    _rule(cli, db, "asserted", ASSERTED, "--applies-to", "scope=global", "--confidence", "asserted")
    both = json.loads(cli("--db", str(db), "select", FRIDAY, "--budget", "5", "--json", *UNRACED).out)[
        "blocks"
    ]
    assert [(b["entry_id"], b["rank"], b["source_type"]) for b in both] == [
        ("observed", 0, "memorule"),
        ("asserted", 1, "memorule"),
    ]
    score = {b["entry_id"]: b["score"] for b in both}
    assert score["asserted"] > score["observed"]  # relevance alone would inject the asserted one
    assert _ids(cli("--db", str(db), "select", FRIDAY, "--budget", "1", "--json", *UNRACED)) == ["observed"]


def _persona_rules(cli, db: Path) -> None:
    for persona in ("donna", "texi"):
        _rule(
            cli,
            db,
            f"rule-{persona}",
            f"{persona.title()} never deploys to production on a Friday afternoon.",
            "--applies-to",
            f"persona={persona}",
        )


def test_select_and_recall_rank_by_the_session_context(tmp_path: Path, cli) -> None:
    """`--persona` excludes a rule for another persona and ranks the matching one first; with
    no context flag, persona-keyed rules are kept (applies_to ranks, it does not filter)."""
    db = tmp_path / "m.db"
    _persona_rules(cli, db)
    base = ("--db", str(db))
    lexical = ("--mode", "lexical", "--json")
    assert _ids(cli(*base, "select", FRIDAY, *lexical, *UNRACED, "--persona", "texi")) == ["rule-texi"]
    assert sorted(_ids(cli(*base, "select", FRIDAY, *lexical, *UNRACED))) == ["rule-donna", "rule-texi"]
    ran = cli(*base, "recall", FRIDAY, *lexical, "--source-type", "memorule", "--persona", "donna")
    assert ran.status == 0, ran
    rows = json.loads(ran.out)
    assert [(r["id"], r["source_type"], r["applies_to"]) for r in rows] == [
        ("rule-donna", "memorule", {"persona": "donna"})
    ]
    assert {"memorule_kind", "confidence", "evidence_signal_id", "written_at"} <= set(rows[0])
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"task": FRIDAY, "persona": "donna"}) + "\n", encoding="utf-8")
    ran = cli(*base, "select", "--batch", str(batch), "--mode", "lexical", *UNRACED)
    assert _ids(ran) == ["rule-donna"]


def test_recall_source_type_mirrors_semantic_recall(tmp_path: Path, cli) -> None:
    """`--source-type memorule` returns memorules only; `memory` (the default) returns notes and
    memorules together, each row saying which it is."""
    db = tmp_path / "m.db"
    _rule(cli, db, "rule", OBSERVED, "--applies-to", "scope=project")
    note = cli("--db", str(db), "remember", "Friday afternoon production deploys need the on-call lead.")
    assert note.status == 0, note
    base = ("--db", str(db), "recall", FRIDAY, "--mode", "lexical", "--json")
    memory = {r["id"]: r["source_type"] for r in json.loads(cli(*base).out)}
    assert memory == {"rule": "memorule", note.out.strip(): "memory"}
    memorule = [r["id"] for r in json.loads(cli(*base, "--source-type", "memorule").out)]
    assert memorule == ["rule"]
    bad = cli(*base, "--source-type", "notes")
    assert bad.status == 2
    assert len(bad.err_lines) == 1


def test_demo_takes_the_session_context(tmp_path: Path, cli) -> None:
    """`demo --persona` builds the turn's SessionContext: another persona's rule stays out."""
    db = tmp_path / "m.db"
    _rule(
        cli,
        db,
        "release-rule",
        "The release checklist and release notes always list every migration first.",
        "--applies-to",
        "persona=texi",
    )
    base = ("--db", str(db), "demo", RELEASE, "--mode", "lexical", "--json", *UNRACED)
    ids = {b["entry_id"] for b in json.loads(cli(*base, "--persona", "texi").out)["blocks"]}
    assert "release-rule" in ids
    ids = {b["entry_id"] for b in json.loads(cli(*base, "--persona", "donna").out)["blocks"]}
    assert "release-rule" not in ids
