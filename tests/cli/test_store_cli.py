"""The store commands driven as a subprocess: stdout is the result, stderr the logs, exit 2 on errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FILLER = [
    "Standup moved to ten because of the dentist appointment",
    "The staging database was upgraded to Postgres sixteen",
    "Priya prefers short pull requests with screenshots",
    "Our office plants need watering every Friday",
    "The team offsite will be in Lisbon in spring",
    "Invoices are sent on the first business day of the month",
]


def run(db: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTEXT_BROKER_DB": str(db)}
    return subprocess.run(
        [sys.executable, "-m", "broker", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=120,
        check=False,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "cli.db"
    lines = [json.dumps({"text": t}) for t in FILLER]
    lines.append(
        json.dumps(
            {
                "id": "deploy-1",
                "text": "Deploys freeze every Friday after the payment incident",
                "memory_type": "procedural",
            }
        )
    )
    src = tmp_path / "m.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run(path, "ingest", str(src))
    assert result.returncode == 0, result.stderr
    return path


def test_ingest_then_recall_json(db: Path) -> None:
    """Ingested ids are kept; recall --json prints the candidates above the floor with all fields."""
    result = run(db, "recall", "payment incident deploy freeze", "--json", "--mode", "lexical")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows[0]["id"] == "deploy-1"
    assert set(rows[0]) == {"id", "score", "text", "memory_type", "kind", "created_at"}
    for line in result.stderr.splitlines():
        json.loads(line)  # logs are JSON lines on stderr only


def test_nothing_relevant_prints_empty_array(db: Path) -> None:
    """A trivial query prints [] and exits 0."""
    result = run(db, "recall", "what time is it", "--json", "--mode", "lexical")
    assert (result.returncode, result.stdout.strip()) == (0, "[]")


def test_remember_prints_id_and_global_options_after_subcommand(tmp_path: Path) -> None:
    """Remember prints the new id; --db and --tenant are accepted after the subcommand too."""
    db = tmp_path / "x.db"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "broker",
            "remember",
            "kept id note",
            "--id",
            "n-1",
            "--db",
            str(db),
            "--tenant",
            "t9",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stdout.strip()) == (0, "n-1"), result.stderr
    stats = run(db, "stats", "--tenant", "t9")
    assert json.loads(stats.stdout)["entries"] == 1


def test_bad_ingest_line_reports_line_number_and_writes_nothing(tmp_path: Path) -> None:
    """A bad line is reported with its number; nothing from the file is written."""
    db = tmp_path / "b.db"
    src = tmp_path / "bad.jsonl"
    src.write_text('{"text": "fine memory"}\n{"text": ""}\nnot json\n{"txt": "typo"}\n', encoding="utf-8")
    result = run(db, "ingest", str(src))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "line 3" in result.stderr
    assert "line 4" in result.stderr
    assert "line 2" in result.stderr
    assert json.loads(run(db, "stats").stdout)["entries"] == 0


def test_invalid_memory_type_exits_2_naming_the_field(tmp_path: Path) -> None:
    """Errors exit 2 with a line naming the field, never a traceback."""
    result = run(tmp_path / "e.db", "recall", "x", "--types", "dreams")
    assert result.returncode == 2
    assert "--types" in result.stderr
    assert "Traceback" not in result.stderr


def test_corrupt_database_is_a_clear_error(tmp_path: Path) -> None:
    """A file that is not SQLite gives one clear line and exit 2."""
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"\x00garbage" * 512)
    result = run(bad, "stats")
    assert result.returncode == 2
    assert "not a usable SQLite database" in result.stderr
    assert "Traceback" not in result.stderr
