"""`--db` and `CONTEXT_BROKER_DB` take a path or a URL: `sqlite:///` opens SQLite, a
PostgreSQL URL the PostgreSQL engine (a server that cannot be reached: one line, exit 2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from cli_subprocess import UNRACED

if TYPE_CHECKING:
    from pathlib import Path


def test_a_sqlite_url_opens_the_file_it_names(cli: Any, tmp_path: Path) -> None:
    """`sqlite:////abs/path` is the same store as the path itself."""
    path = tmp_path / "u.db"
    assert cli("--db", f"sqlite:///{path}", "remember", "Deploys freeze on Fridays").status == 0
    listed = cli("--db", str(path), "stats")
    assert listed.status == 0
    assert "entries   1 in default/default" in listed.out


@pytest.mark.parametrize("via_env", [False, True])
def test_an_unreachable_postgresql_url_exits_2_with_one_line(
    cli: Any, monkeypatch: pytest.MonkeyPatch, via_env: bool
) -> None:
    """A PostgreSQL server that refuses the connection: one line (the extra, or the server), no password."""
    url = "postgresql://agent:s3cret@127.0.0.1:1/memory"
    if via_env:
        monkeypatch.setenv("CONTEXT_BROKER_DB", url)
        ran = cli("stats")
    else:
        ran = cli("--db", url, "stats")
    assert ran.status == 2
    assert len(ran.err_lines) == 1
    assert "[postgres]" in ran.err_lines[0] or "unreachable" in ran.err_lines[0]
    assert "s3cret" not in ran.err_lines[0]


def test_the_cli_remembers_and_selects_on_a_postgresql_server(cli: Any, pg_url: str) -> None:
    """`--db postgresql://...` runs the everyday commands on the PostgreSQL engine."""
    pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    assert cli("--db", pg_url, "--tenant", "acme", "remember", "Deploys freeze every Friday").status == 0
    assert cli("--db", pg_url, "--tenant", "acme", "remember", "Lunch moved to the Italian place").status == 0
    listed = cli("--db", pg_url, "--tenant", "acme", "stats")
    assert listed.status == 0
    assert "entries   2 in acme/default" in listed.out
    chosen = cli(
        "--db", pg_url, "--tenant", "acme", "select", "when do deploys freeze", "--mode", "lexical", *UNRACED
    )
    assert chosen.status == 0
    assert "Deploys freeze every Friday" in chosen.out


def test_ingest_into_postgresql_leaves_its_tables_analyzed(cli: Any, pg_url: str, tmp_path: Path) -> None:
    """A bulk `ingest` ends with ANALYZE, so the planner sees the loaded rows, not an empty table."""
    psycopg = pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    notes = tmp_path / "notes.jsonl"
    notes.write_text("".join(f'{{"text": "note {i} about release {i % 7}"}}\n' for i in range(300)))
    assert cli("--db", pg_url, "--tenant", "acme", "ingest", str(notes)).status == 0
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'context_broker' AND c.relname = 'entries'"
        ).fetchone()
    assert row is not None
    assert row[0] >= 300  # -1 until the table is analyzed


def test_an_empty_db_flag_exits_2_instead_of_using_the_default_store(cli: Any) -> None:
    """`--db ""` (a script's unset variable) is refused on one line, never taken as the default store."""
    ran = cli("--db", "", "remember", "hello")
    assert ran.status == 2
    assert len(ran.err_lines) == 1
    assert "empty" in ran.err_lines[0]
