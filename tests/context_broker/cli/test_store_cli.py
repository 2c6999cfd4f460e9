"""The store commands driven as a subprocess: stdout is the result, stderr the logs, exit 2 on errors."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_subprocess import UNRACED
from cli_subprocess import run_on as run

from broker import Namespace
from sources import MemoryStore, WriterSession, remember, update_memorule

WRITER = WriterSession(session_id="sess-1", persona="donna")

FILLER = [
    "Standup moved to ten because of the dentist appointment",
    "The staging database was upgraded to Postgres sixteen",
    "Priya prefers short pull requests with screenshots",
    "Our office plants need watering every Friday",
    "The team offsite will be in Lisbon in spring",
    "Invoices are sent on the first business day of the month",
]


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
    assert set(rows[0]) == {"id", "score", "text", "memory_type", "kind", "created_at", "source_type"}
    assert rows[0]["source_type"] == "memory"
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
            "context_broker",
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
    stats = run(db, "stats", "--tenant", "t9", "--json")
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
    assert not db.exists()  # every line is checked before the store is opened


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


def test_ingest_record_types_load_every_source(tmp_path: Path) -> None:
    """`ingest` loads facts, knowledge, neurons, graph nodes and edges; select then finds them."""
    db = tmp_path / "r.db"
    src = tmp_path / "records.jsonl"
    lines = [json.dumps({"text": t}) for t in FILLER]
    lines += [
        json.dumps(
            {
                "record": "fact",
                "subject": "Ana",
                "predicate": "leads",
                "object": "the billing team",
                "id": "f1",
            }
        ),
        json.dumps(
            {
                "record": "knowledge",
                "text": "Billing incidents in March came from expired certificates",
                "provenance": ["x"],
                "id": "k1",
            }
        ),
        json.dumps(
            {
                "record": "neuron",
                "text": "When billing breaks, check certificate expiry first",
                "triggers": ["billing outage"],
                "id": "n1",
            }
        ),
        json.dumps({"record": "node", "name": "Ana", "id": "ana"}),
        json.dumps({"record": "node", "name": "billing team", "id": "billing"}),
        json.dumps({"record": "edge", "src": "ana", "relation": "leads", "dst": "billing"}),
    ]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run(db, "ingest", str(src), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["written"] == len(lines)
    selected = run(
        db,
        "select",
        "which certificates expired in the March billing incidents?",
        "--json",
        "--mode",
        "lexical",
        *UNRACED,
    )
    assert selected.returncode == 0, selected.stderr
    blocks = json.loads(selected.stdout)["blocks"]
    assert "knowledge:k1" in {b["entry_id"] for b in blocks}


def test_bad_record_lines_are_all_reported(tmp_path: Path) -> None:
    """Unknown record types and missing record fields are reported per line; nothing is written."""
    db = tmp_path / "b.db"
    src = tmp_path / "bad.jsonl"
    src.write_text('{"record": "edge", "src": "a"}\n{"record": "blob"}\n{"text": "fine"}\n', encoding="utf-8")
    result = run(db, "ingest", str(src))
    assert result.returncode == 2
    assert "line 1: dst: required" in result.stderr
    assert "line 2: record: must be one of" in result.stderr
    assert not db.exists()  # every line is checked before the store is opened


def test_select_batch_writes_one_object_per_line_and_validates_first(tmp_path: Path, db: Path) -> None:
    """`select --batch` answers every line in order in one process, each naming its line and task;
    a bad line fails the whole batch."""
    batch = tmp_path / "tasks.jsonl"
    batch.write_text(
        json.dumps({"task": "payment incident deploy freeze", "mode": "lexical", "message": "now"})
        + "\n\n"
        + json.dumps({"task": "what time is it", "mode": "lexical", "budget": 3})
        + "\n",
        encoding="utf-8",
    )
    result = run(db, "select", "--batch", str(batch), *UNRACED)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["line"], r["task"]) for r in rows] == [
        (1, "payment incident deploy freeze"),
        (3, "what time is it"),
    ]
    assert [r["abstained"] for r in rows] == [False, True]
    assert rows[0]["blocks"][0]["entry_id"] == "deploy-1"
    assert {s["name"] for s in rows[0]["sources"]} >= {
        "store",
        "neurons",
        "graphs",
        "abstraction",
        "consolidated",
        "persona",
    }
    batch.write_text('{"task": "fine"}\n{"task": ""}\n{"task": "x", "budget": 0}\n', encoding="utf-8")
    bad = run(db, "select", "--batch", str(batch))
    assert (bad.returncode, bad.stdout) == (2, "")
    assert "line 2" in bad.stderr
    assert "line 3" in bad.stderr


def test_reindex_reports_nothing_stale_after_ingest(db: Path) -> None:
    """Vectors written at ingest are current: reindex re-embeds nothing and stats says so."""
    result = run(db, "reindex", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reindexed"] == 0
    stats = json.loads(run(db, "stats", "--json").stdout)
    assert stats["vectors"]["stale"] == 0
    assert stats["vectors"]["missing"] == 0


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (("select", "x" * 120_000), "error: TASK: must be at most 32000 chars (too_long)"),
        (
            ("select", "bad \udcff bytes"),
            "error: TASK: must be valid Unicode (no lone surrogates) (encoding)",
        ),
        (
            ("select", "deploy freeze", "--budget", "99999999999999999999"),
            "error: --budget: must be an integer in 1..1000, got 99999999999999999999",
        ),
        (("recall", "x" * 120_000), "error: QUERY: must be at most 32000 chars (too_long)"),
    ],
    ids=["select-120KB", "select-surrogate", "select-budget", "recall-120KB"],
)
def test_select_refuses_what_recall_refuses_before_any_source_runs(tmp_path: Path, cli, argv, line) -> None:
    """A bad request is one field error and exit 2, never an abstention with failed sources."""
    db = tmp_path / "m.db"
    MemoryStore.open(db, mode="lexical").close()
    ran = cli("--db", str(db), *argv)
    assert (ran.status, ran.err_lines, ran.out) == (2, (line,), "")


def test_damaged_rows_are_skipped_by_recall_and_memorule_history(tmp_path: Path, cli) -> None:
    """Invalid metadata or applies_to JSON in a row: the command serves the rest, exit 0."""
    db = tmp_path / "m.db"
    ns = Namespace(tenant_id="default")
    with MemoryStore.open(db, mode="lexical") as store:
        for i, text in enumerate(FILLER):
            store.add_entry(text, namespace=ns, id=f"f{i}")
        store.add_entry("Deploys freeze every Friday after the payment incident", id="good", namespace=ns)
        store.add_entry("Deploys freeze after the payment incident, said twice", id="bad", namespace=ns)
        remember(
            store,
            kind="memorule",
            namespace=ns,
            id="r1",
            memorule_kind="convention",
            subject="Deploy freeze",
            body="Never deploy the payment service on a Friday afternoon.",
            applies_to={"scope": "project"},
            session=WRITER,
        )
        update_memorule(store, "r1", namespace=ns, confidence="observed", session=WRITER)
        with store.db.write() as conn:
            conn.execute("UPDATE entries SET metadata = '{oops' WHERE id = 'bad'")
            conn.execute("UPDATE memorule_states SET applies_to = 'not json' WHERE rowid = 1")
    ran = cli("--db", str(db), "recall", "payment incident deploy freeze", "--json", "--mode", "lexical")
    assert ran.status == 0, ran
    ids = [r["id"] for r in json.loads(ran.out)]
    assert ids[0] == "good"
    assert "bad" not in ids
    ran = cli("--db", str(db), "memorule", "history", "r1", "--json")
    assert ran.status == 0, ran
    assert [s["version"] for s in json.loads(ran.out)] == [2]


def test_recall_text_mode_says_when_nothing_clears_the_floor(db: Path) -> None:
    """Text mode prints a line saying nothing cleared the floor, instead of printing nothing."""
    result = run(db, "recall", "what time is it", "--mode", "lexical")
    assert (result.returncode, result.stdout) == (0, "nothing relevant: no memory clears the floor (0.42)\n")


def test_stats_prints_text_and_json_on_request(db: Path) -> None:
    """`stats` prints readable counts; `stats --json` the same counts as one JSON object."""
    text = run(db, "stats")
    assert text.returncode == 0, text.stderr
    assert "entries   7 in default/default" in text.stdout
    assert "vectors   7 current, 0 stale, 0 missing" in text.stdout
    assert "records   0 in default/default" in text.stdout
    assert json.loads(run(db, "stats", "--json").stdout)["entries"] == 7


def test_a_batch_line_takes_its_types_as_a_list_or_as_the_flag_spells_them(db: Path) -> None:
    """`"types": "procedural, semantic"` on a batch line queries what `--types procedural,semantic` does."""
    lines = [
        {"task": "deploy freeze", "types": t} for t in (["procedural", "semantic"], "procedural, semantic")
    ]
    tasks = "".join(json.dumps(line) + "\n" for line in lines)
    result = run(db, "select", "--batch", "-", *UNRACED, stdin=tasks)
    assert result.returncode == 0, result.stderr
    queried = [json.loads(line)["types_queried"] for line in result.stdout.splitlines()]
    assert queried == [["procedural", "semantic"]] * 2


def test_a_batch_line_asking_for_a_dense_mode_is_served_under_a_lexical_command_line(db: Path) -> None:
    """`select --batch - --mode lexical` with a line of mode hybrid loads the model for it: no source fails."""
    lines = [{"task": "payment incident deploy freeze", "mode": m} for m in ("hybrid", "dense", None)]
    tasks = "".join(json.dumps({k: v for k, v in line.items() if v}) + "\n" for line in lines)
    result = run(db, "select", "--batch", "-", "--mode", "lexical", *UNRACED, stdin=tasks)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [{s["status"] for s in r["sources"]} <= {"ok", "empty"} for r in rows] == [True] * 3
    assert [r["blocks"][0]["entry_id"] for r in rows] == ["deploy-1"] * 3


def test_select_batch_reads_standard_input(db: Path) -> None:
    """`select --batch -` takes its tasks on standard input."""
    tasks = json.dumps({"task": "payment incident deploy freeze", "mode": "lexical"}) + "\n"
    result = run(db, "select", "--batch", "-", *UNRACED, stdin=tasks)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["blocks"][0]["entry_id"] == "deploy-1"


def test_remember_the_same_text_twice_prints_the_same_id(tmp_path: Path) -> None:
    """Identical text in one namespace is stored once: the second remember prints the first id."""
    db = tmp_path / "r.db"
    first = run(db, "remember", "Lunch orders close at eleven")
    second = run(db, "remember", "Lunch orders close at eleven")
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout
    assert json.loads(run(db, "stats", "--json").stdout)["entries"] == 1


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path, db: Path) -> None:
    """`select --batch ... | head -1`: the closed pipe ends the command quietly (exit 141), no traceback."""
    batch = tmp_path / "many.jsonl"
    task = json.dumps({"task": "payment incident deploy freeze", "mode": "lexical"})
    batch.write_text((task + "\n") * 400, encoding="utf-8")  # well over a pipe buffer of output
    env = {**os.environ, "CONTEXT_BROKER_DB": str(db)}
    with subprocess.Popen(
        [sys.executable, "-m", "context_broker", "select", "--batch", str(batch), *UNRACED],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        assert json.loads(proc.stdout.readline())["blocks"]
        proc.stdout.close()
        stderr = proc.stderr.read().decode("utf-8")
        assert proc.wait(timeout=120) == 141
    assert "Traceback" not in stderr


def test_remember_reads_its_text_from_standard_input_with_a_dash(tmp_path: Path) -> None:
    """`remember -` stores what standard input holds (one trailing line break dropped), and its
    length is checked like an argument's: the dash itself is never stored."""
    db = tmp_path / "m.db"
    stored = run(db, "remember", "-", stdin="Priya moved the standup to ten.\n")
    assert stored.returncode == 0, stored.stderr
    with sqlite3.connect(db) as conn:
        texts = [r[0] for r in conn.execute("SELECT text FROM entries")]
    assert texts == ["Priya moved the standup to ten."]
    too_long = run(db, "remember", "-", stdin="a" * 40_000)
    assert too_long.returncode == 2
    assert "at most 32000" in too_long.stderr
