"""The memorule commands: `remember --kind memorule`, `memorule update|delete|history`, `audit`.

Driven as a subprocess (`python -m context_broker`), plus the `remember` handler in-process with the
arguments `add_remember_arguments` defines (so its all-errors-at-once contract is tested even
before the store commands delegate `remember` to it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
import structlog

from broker import Namespace, ValidationError
from context_broker._cli._app import App
from context_broker._cli._memorules import add_remember_arguments, parse_applies_to, remember_command
from context_broker._cli._session import writer_session
from context_broker.wiring import ENV_PERSONA
from sources import MemoryStore, WriterSession, audit_events, memorule_history

if TYPE_CHECKING:
    from pathlib import Path

NO_WRITER = "a memorule write names its writer: give --persona or set $CONTEXT_BROKER_PERSONA"
BODY = "Always store timestamps in UTC with an explicit offset."
RULE = (
    "remember",
    "--kind",
    "memorule",
    "--memorule-kind",
    "correction",
    "--subject",
    "UTC timestamps",
    BODY,
    "--applies-to",
    "scope=project",
    "--applies-to",
    "persona=donna",
    "--confidence",
    "observed",
    "--evidence-signal-id",
    "sig-42",
    "--session-id",
    "sess-1",
    "--persona",
    "donna",
)


def run(db: Path, *args: str, persona: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_PERSONA} | {"CONTEXT_BROKER_DB": str(db)}
    if persona is not None:
        env[ENV_PERSONA] = persona
    return subprocess.run(
        [sys.executable, "-m", "context_broker", "--tenant", "acme", "--project", "web", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


# -- through the real CLI -------------------------------------------------------------------


def test_audit_on_an_empty_database_prints_empty_array(tmp_path: Path) -> None:
    """`audit --json` on a database with no events prints [] and exits 0."""
    MemoryStore.open(tmp_path / "e.db", mode="lexical").close()
    result = run(tmp_path / "e.db", "audit", "--json")
    assert (result.returncode, result.stdout.strip()) == (0, "[]"), result.stderr


def test_audit_rejects_a_bad_since(tmp_path: Path) -> None:
    """An unparsable --since is one error line and exit 2."""
    MemoryStore.open(tmp_path / "e.db", mode="lexical").close()
    result = run(tmp_path / "e.db", "audit", "--since", "yesterday")
    assert result.returncode == 2
    assert "error: --since: must be ISO-8601 (invalid_timestamp)" in result.stderr.splitlines()


def test_remember_update_history_delete_audit(tmp_path: Path) -> None:
    """A memorule written, updated and deleted through the CLI leaves its history and events."""
    db = tmp_path / "m.db"
    result = run(db, *RULE)
    assert result.returncode == 0, result.stderr
    rid = result.stdout.strip()
    assert run(db, "memorule", "update", rid, "--confidence", "inferred", persona="texi").returncode == 0
    result = run(db, "memorule", "history", rid, "--json")
    assert result.returncode == 0, result.stderr
    states = json.loads(result.stdout)
    assert [(s["version"], s["confidence"]) for s in states] == [(1, "observed"), (2, "inferred")]
    assert states[0]["applies_to"] == {"persona": "donna", "scope": "project"}
    assert states[0]["body"] == BODY
    result = run(db, "audit", "--json")
    events = json.loads(result.stdout)
    assert [(e["memorule_id"], e["action"]) for e in events] == [(rid, "create"), (rid, "update")]
    assert events[0]["written_by_persona"] == "donna"
    assert events[1]["written_by_persona"] == "texi"  # from $CONTEXT_BROKER_PERSONA
    assert events[0]["evidence_signal_id"] == "sig-42"
    assert run(db, "memorule", "delete", rid, "--persona", "donna").returncode == 0
    assert run(db, "memorule", "delete", rid, "--persona", "donna").returncode == 2
    assert run(db, "memorule", "history", rid).returncode == 2
    assert [e["action"] for e in json.loads(run(db, "audit", "--json").stdout)] == [
        "create",
        "update",
        "delete",
    ]


def test_history_shows_each_bodys_text_and_says_when_the_rule_was_deleted(tmp_path: Path) -> None:
    """The text history shows what changed (the body of each version); after a delete, `history`
    says when and by whom the rule was deleted (exit 2), where an unknown id says not found."""
    db = tmp_path / "m.db"
    rid = run(db, *RULE).stdout.strip()
    new_body = "Store timestamps in UTC; convert at the edges only."
    assert run(db, "memorule", "update", rid, "--body", new_body, "--persona", "texi").returncode == 0
    lines = run(db, "memorule", "history", rid).stdout.splitlines()
    assert [line.split("  ")[0] for line in lines] == ["v1", "v2"]
    assert f"UTC timestamps: {BODY}" in lines[0]
    assert f"UTC timestamps: {new_body}" in lines[1]
    assert run(db, "memorule", "delete", rid, "--persona", "donna").returncode == 0
    gone = run(db, "memorule", "history", rid)
    assert gone.returncode == 2
    assert f"memorule {rid!r} in acme/web was deleted at " in gone.stderr
    assert "by donna" in gone.stderr
    assert gone.stderr.rstrip().endswith("(deleted)")
    unknown = run(db, "memorule", "history", "no-such-rule")
    assert (unknown.returncode, unknown.stderr.rstrip().endswith("(not_found)")) == (2, True)


def test_remember_prints_every_error_and_exits_2(tmp_path: Path) -> None:
    """Missing and invalid memorule flags are all reported, one line each, and nothing is written."""
    db = tmp_path / "m.db"
    result = run(
        db,
        "remember",
        "--kind",
        "memorule",
        "--subject",
        "ab",
        "--applies-to",
        "oops",
        "--applies-to",
        "scope=everywhere",
        "--confidence",
        "sure",
        "--session-id",
        "sess-1",
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert sorted(errors) == sorted(
        [
            "error: --applies-to: expected KEY=VALUE, got 'oops' (invalid_format)",
            f"error: --persona: {NO_WRITER} (required)",
            "error: --memorule-kind: is required for kind 'memorule' (required)",
            "error: --subject: must be at least 4 chars (too_short)",
            "error: --body: is required for kind 'memorule' (required)",
            (
                "error: --applies-to: scope must be one of global, org, project, persona; got 'everywhere' "
                "(invalid_choice)"
            ),
            "error: --confidence: must be one of observed, inferred, asserted; got 'sure' (invalid_choice)",
        ]
    )
    assert "Traceback" not in result.stderr
    assert not db.exists()  # refused before the store was even opened


def test_memorule_commands_report_unknown_ids(tmp_path: Path) -> None:
    """Updating an unknown id exits 2 naming the id; delete and history exit 1."""
    db = tmp_path / "m.db"
    MemoryStore.open(db, mode="lexical").close()
    result = run(db, "memorule", "update", "nope", "--confidence", "observed", "--persona", "donna")
    assert result.returncode == 2
    assert any(
        line.startswith("error: ID: ") and "(not_found)" in line for line in result.stderr.splitlines()
    )
    deleted = run(db, "memorule", "delete", "nope", "--persona", "donna")
    assert deleted.returncode == 2  # an unknown id is bad input, as for update
    assert deleted.stderr.startswith("error: ID: no memorule 'nope'")
    assert run(db, "memorule", "history", "nope", "--json").returncode == 2


# -- the remember handler, in-process -------------------------------------------------------


def _args(db: Path, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_remember_arguments(parser)
    args = parser.parse_args(list(argv))
    args.db, args.tenant, args.project = str(db), "acme", "web"
    args.command = "remember"
    return args


def _remember(db: Path, *argv: str) -> int:
    app = App(args=_args(db, *argv))
    try:
        with structlog.testing.capture_logs():  # the host (CLI main) configures logging, not us
            return remember_command(app.args, app)
    finally:
        app.close()


def test_handler_writes_a_memorule_and_prints_its_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The handler writes the memorule with every flag's value and prints only its id."""
    db = tmp_path / "m.db"
    assert _remember(db, *RULE[1:]) == 0
    rid = capsys.readouterr().out.strip()
    with MemoryStore.open(db, mode="lexical") as store:
        (state,) = memorule_history(store, rid, namespace=Namespace(tenant_id="acme", project_id="web"))
        (event,) = audit_events(store)
    assert (state.memorule_kind, state.subject, state.body, state.confidence) == (
        "correction",
        "UTC timestamps",
        BODY,
        "observed",
    )
    assert state.applies_to == {"scope": "project", "persona": "donna"}
    assert (event.memorule_id, event.written_by_session_id, event.evidence_signal_id) == (
        rid,
        "sess-1",
        "sig-42",
    )


def test_handler_writes_notes_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --kind, TEXT is a note's text (no audit event)."""
    db = tmp_path / "m.db"
    assert _remember(db, "a plain note", "--memory-type", "episodic", "--id", "n1") == 0
    assert capsys.readouterr().out.strip() == "n1"
    with MemoryStore.open(db, mode="lexical") as store:
        assert audit_events(store) == []


def test_handler_reports_all_field_errors_at_once(tmp_path: Path) -> None:
    """Parse errors (applies_to format, session pair, importance) join the validation errors."""
    with pytest.raises(ValidationError) as exc:
        _remember(
            tmp_path / "m.db",
            "--kind",
            "memorule",
            "--applies-to",
            "broken",
            "--persona",
            "donna",
            "--importance",
            "high",
            "--memory-type",
            "dream",
        )
    assert {(e.field, e.code) for e in exc.value.errors} == {
        ("applies_to", "invalid_format"),
        ("importance", "type"),
        ("memorule_kind", "required"),
        ("subject", "required"),
        ("body", "required"),
        ("memory_type", "invalid_choice"),
    }
    assert not (tmp_path / "m.db").exists()


def test_parse_applies_to() -> None:
    """KEY=VALUE pairs parse; malformed and repeated keys are field errors."""
    assert parse_applies_to(None) == (None, [])
    got, errors = parse_applies_to(["scope=org", "persona=a=b", "=x", "scope=global"])
    assert got == {"scope": "org", "persona": "a=b"}
    assert [(e.field, e.code) for e in errors] == [
        ("applies_to", "invalid_format"),
        ("applies_to", "duplicate"),
    ]


def test_writer_session_derives_the_id_and_requires_a_persona(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session id defaults to the invocation's; the persona comes from the flag, else the
    environment, else it is a `persona: required` error."""
    monkeypatch.delenv(ENV_PERSONA, raising=False)
    session, errors = writer_session(None, "donna", derived_id="inv-1")
    assert (session, errors) == (WriterSession(session_id="inv-1", persona="donna"), [])
    assert writer_session("s", "p", derived_id="inv-1")[0] == WriterSession(session_id="s", persona="p")
    session, errors = writer_session("s", None, derived_id="inv-1")
    assert (session, [(e.field, e.code) for e in errors]) == (None, [("persona", "required")])
    monkeypatch.setenv(ENV_PERSONA, "texi")
    assert writer_session(None, None, derived_id="inv-1")[0] == WriterSession(
        session_id="inv-1", persona="texi"
    )
    assert writer_session(None, "donna", derived_id="inv-1")[0] == WriterSession(
        session_id="inv-1", persona="donna"
    )


def test_every_cli_memorule_write_records_its_writer(tmp_path: Path, cli, monkeypatch) -> None:
    """Without --session-id each invocation gets its own session id; without a persona the
    write is refused with one line and exit 2, and nothing is written."""
    monkeypatch.delenv(ENV_PERSONA, raising=False)
    db = str(tmp_path / "w.db")
    rule = ("--kind", "memorule", "--memorule-kind", "convention", "--subject", "UTC times", BODY)
    rule += ("--applies-to", "scope=global")
    refused = cli("--db", db, "remember", *rule)
    assert (refused.status, refused.out) == (2, "")
    assert refused.err_lines == (f"error: --persona: {NO_WRITER} (required)",)
    assert not (tmp_path / "w.db").exists()
    first = cli("--db", db, "remember", *rule, "--persona", "donna")
    assert first.status == 0, first
    assert first.err_lines == ()  # the audit event is a log line of level info: quiet by default
    monkeypatch.setenv(ENV_PERSONA, "texi")
    rid = first.out.strip()
    assert cli("--db", db, "memorule", "update", rid, "--confidence", "observed").status == 0
    events = json.loads(cli("--db", db, "audit", "--json").out)
    writers = [(e["written_by_persona"], e["written_by_session_id"]) for e in events]
    assert [p for p, _ in writers] == ["donna", "texi"]
    sessions = [s for _, s in writers]
    assert all(sessions)
    assert sessions[0] != sessions[1]  # one derived id per invocation


def test_a_note_takes_no_writer(tmp_path: Path, cli) -> None:
    """A writer flag on a note is refused (notes are not audited), one line, exit 2."""
    ran = cli("--db", str(tmp_path / "n.db"), "remember", "a plain note", "--persona", "donna")
    assert ran.status == 2
    assert ran.err_lines == ("error: --persona: is only accepted with kind 'memorule' (not_allowed)",)


@pytest.mark.parametrize(
    "bad", [("--importance", "2"), ("--memory-type", "bogus")], ids=["importance", "memory type"]
)
def test_remember_checks_every_flag_before_creating_a_store(tmp_path: Path, cli, bad) -> None:
    """A bad flag on a first `remember` exits 2 and leaves no store behind."""
    ran = cli("--db", str(tmp_path / "new.db"), "remember", "a plain note", *bad)
    assert ran.status == 2
    assert ran.err_lines[0].startswith(f"error: {bad[0]}: ")
    assert list(tmp_path.iterdir()) == []
