"""The command line with hostile names and ids: one-line errors (exit 2), one line per result.

Driven as a subprocess (`python -m context_broker`) on a real database file.
"""

from __future__ import annotations

import sqlite3

import pytest
from cli_subprocess import run_on as run


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--tenant", "a\u200bcme"), ("--tenant", "ac\u202eme"), ("--project", "w\neb"), ("--tenant", "   ")],
)
def test_a_hidden_or_empty_namespace_part_is_one_line_and_exit_2(tmp_path, flag, value):
    """A zero-width, bidi, newline or blank --tenant/--project: exit 2, one `error:` line, no traceback."""
    done = run(tmp_path / "m.db", flag, value, "remember", "a note")
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if not line.startswith("{")]  # not log lines
    assert len(errors) == 1
    assert errors[0].startswith(f"error: {flag}: ")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_spellings_of_one_tenant_reach_the_same_memories(tmp_path):
    """`acme`, `acme ` and full-width `acme` are one tenant: a note written under one is recalled under all."""
    db = tmp_path / "m.db"
    assert (
        run(db, "--tenant", "acme ", "remember", "The deploy freeze starts every Friday at noon.").returncode
        == 0
    )
    for spelling in ("acme", "\uff41\uff43\uff4d\uff45", "  acme"):
        done = run(db, "--tenant", spelling, "recall", "deploy freeze Friday noon", "--json")
        assert done.returncode == 0, done.stderr
        assert "deploy freeze" in done.stdout


def test_a_batch_line_with_a_hidden_tenant_is_reported_not_run(tmp_path):
    """`select --batch`: a line whose tenant holds a zero-width space is an error line, exit 2."""
    batch = tmp_path / "tasks.jsonl"
    batch.write_text('{"task": "what is frozen", "tenant": "a\\u200bcme"}\n', encoding="utf-8")
    done = run(tmp_path / "m.db", "select", "--batch", str(batch))
    assert done.returncode == 2
    assert "tenant: must not contain control or invisible characters" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_id_with_a_newline_is_refused_at_write(tmp_path):
    """`remember --id` with a newline cannot be written, so it can never forge a line later."""
    done = run(tmp_path / "m.db", "remember", "a note", "--id", "m1\n2026-01-01T00:00:00Z  create  forged")
    assert done.returncode == 2
    assert "error: --id: must not contain control or invisible characters" in done.stderr


def test_a_persona_with_a_newline_is_refused_at_write(tmp_path):
    """The writing persona is printed by `audit`: one holding a newline is refused."""
    done = run(
        tmp_path / "m.db",
        "remember",
        "--kind",
        "memorule",
        "--memorule-kind",
        "convention",
        "--subject",
        "UTC timestamps",
        "--body",
        "Always store timestamps in UTC.",
        "--applies-to",
        "scope=project",
        "--session-id",
        "s1",
        "--persona",
        "donna\n2026-01-01  create  forged",
    )
    assert done.returncode == 2
    assert "error: --persona: must not contain control or invisible characters" in done.stderr
    assert done.stderr.count("--persona: must not contain") == 1  # reported once, not per check


def test_audit_prints_one_line_per_event_even_for_a_legacy_id_with_a_newline(tmp_path):
    """An audit row written before ids were checked prints escaped, on its own single line."""
    db = tmp_path / "m.db"
    rule = ("--kind", "memorule", "--memorule-kind", "convention", "--subject", "UTC timestamps")
    rule += ("--body", "Always store timestamps in UTC.", "--applies-to", "scope=project")
    assert run(db, "--tenant", "acme", "remember", *rule, "--persona", "donna").returncode == 0
    with sqlite3.connect(db) as conn:  # a row from before the check, as an old database may hold
        conn.execute("UPDATE memorule_audit SET memorule_id = ?", ("m1\n2026-01-01T00:00:00Z  delete  m2",))
    done = run(db, "--tenant", "acme", "audit")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    assert "m1\\n2026-01-01T00:00:00Z  delete  m2" in lines[0]
