"""`ingest` driven as a subprocess: one record format (the docs' examples and the bundled sample
load as shipped), idempotent re-ingest, standard input, encodings, and progress."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import anyio
import pytest
from cli_subprocess import UNRACED

from broker import Namespace
from context_broker._cli._ingest import PROGRESS_MIN_NOTES
from context_broker._cli._records import RECORDS
from sources import MemoryStore, SqliteTaskRepository, memorule_history
from sources.storage._sqlite._schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[3]
NS = Namespace(tenant_id="default", project_id="default")
NOTES = [
    "Standup moved to ten because of the dentist appointment",
    "The staging database was upgraded to Postgres sixteen",
    "Priya prefers short pull requests with screenshots",
    "Our office plants need watering every Friday",
    "The team offsite will be in Lisbon in spring",
    "Invoices are sent on the first business day of the month",
    "Deploys freeze every Friday after the payment incident",
    "Marco is allergic to peanuts, order lunch accordingly",
]


def run(db: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CONTEXT_BROKER_PERSONA"}
    env["CONTEXT_BROKER_DB"] = str(db)
    done = subprocess.run(
        [sys.executable, "-m", "context_broker", *args],
        capture_output=True,
        env=env,
        input=stdin,
        timeout=300,
        check=False,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    )


def entries(db: Path) -> int:
    return int(json.loads(run(db, "stats", "--json").stdout)["entries"])


def doc_examples() -> list[str]:
    """Every example line of docs/records.md, in order."""
    text = (ROOT / "docs" / "records.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def notes_file(tmp_path: Path, texts: list[str] = NOTES) -> Path:
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def test_every_example_line_of_the_records_doc_ingests(tmp_path: Path) -> None:
    """docs/records.md shows every record type, and each of its example lines loads as shown."""
    lines = doc_examples()
    types = {json.loads(line).get("record", "note") for line in lines}
    assert types == set(RECORDS)
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run(tmp_path / "d.db", "ingest", str(src), "--persona", "donna")
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout
        == f"ingested {len(lines)} records into default/default: {len(lines)} written, 0 already stored\n"
    )


def test_the_bundled_sample_ingests_as_shipped(tmp_path: Path) -> None:
    """context_broker/data/sample_memories.jsonl ingests as shipped, no --persona: its memorules
    name their writer, whom the audit trail records."""
    sample = ROOT / "context_broker" / "data" / "sample_memories.jsonl"
    done = run(tmp_path / "s.db", "ingest", str(sample), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == len(sample.read_text(encoding="utf-8").splitlines())
    audit = run(tmp_path / "s.db", "audit", "--json")
    writers = {(e["written_by_persona"], e["written_by_session_id"]) for e in json.loads(audit.stdout)}
    assert writers == {("sample-data", "context-broker-demo")}


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"], ids=["empty", "blank lines"])
def test_an_input_without_records_creates_no_store(tmp_path: Path, content: bytes) -> None:
    """`ingest -` of an empty input (or blank lines only) says so on one line, exits 2 and
    creates nothing: no store file appears."""
    db = tmp_path / "memory.db"
    done = run(db, "ingest", "-", stdin=content)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ["error: standard input: no records (no store was created)"]
    assert list(tmp_path.iterdir()) == []


def test_a_new_store_whose_first_record_fails_is_not_left_behind(tmp_path: Path) -> None:
    """A refused first record (an edge between nodes the store lacks) leaves no store file; once
    a record is written the store stays, with that record."""
    db = tmp_path / "memory.db"
    edge = b'{"record": "edge", "src": "a", "relation": "calls", "dst": "b"}\n'
    done = run(db, "ingest", "-", stdin=edge)
    assert done.returncode == 2, done.stderr
    assert list(tmp_path.iterdir()) == []
    node = b'{"record": "node", "id": "a", "name": "Alpha service"}\n'
    done = run(db, "ingest", "-", stdin=node + edge)
    assert done.returncode == 2, done.stderr
    assert db.exists()
    assert "1 record written before line 2 stays" in done.stderr


def test_an_input_without_records_into_an_existing_store_ingests_nothing(tmp_path: Path) -> None:
    """An empty export into a store that exists is not an error: 0 records, exit 0."""
    db = tmp_path / "memory.db"
    assert run(db, "remember", "Already here").returncode == 0
    done = run(db, "ingest", "-", stdin=b"")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ingested 0 records into default/default")
    assert entries(db) == 1


def test_ingest_help_points_to_the_records_doc(tmp_path: Path) -> None:
    """`ingest --help` names docs/records.md and says `-` reads standard input."""
    text = " ".join(run(tmp_path / "h.db", "ingest", "--help").stdout.split())
    assert "docs/records.md" in text
    assert '"-": standard input' in text


def test_reingesting_lines_without_ids_stores_nothing_twice(tmp_path: Path) -> None:
    """Ids derived from content: ingest, ingest again, then --replace all leave 8 entries, one per text."""
    db, src = tmp_path / "r.db", notes_file(tmp_path)
    assert run(db, "ingest", str(src)).returncode == 0
    again = run(db, "ingest", str(src))
    assert again.returncode == 0, again.stderr
    assert "0 written, 8 already stored" in again.stdout
    replaced = run(db, "ingest", str(src), "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert entries(db) == len(NOTES)
    selected = run(db, "select", "Deploys freeze every Friday after the payment incident", "--json", *UNRACED)
    ids = [b["entry_id"] for b in json.loads(selected.stdout)["blocks"]]
    assert ids
    assert len(ids) == len(set(ids))


def test_identical_text_is_one_entry_unless_duplicates_are_kept(tmp_path: Path) -> None:
    """A repeated text is stored once; --keep-duplicates stores every copy."""
    db = tmp_path / "k.db"
    src = notes_file(tmp_path, [NOTES[0], NOTES[0], NOTES[1]])
    assert "2 written, 1 already stored" in run(db, "ingest", str(src)).stdout
    assert entries(db) == 2
    assert run(db, "ingest", str(src), "--keep-duplicates").returncode == 0
    assert entries(db) == 5


def test_an_existing_id_names_replace(tmp_path: Path) -> None:
    """Re-ingesting lines with their own ids fails naming each line and --replace; --replace then works."""
    db, src = tmp_path / "i.db", tmp_path / "ids.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"n{i}", "text": t}) + "\n" for i, t in enumerate(NOTES[:2])),
        encoding="utf-8",
    )
    assert run(db, "ingest", str(src)).returncode == 0
    again = run(db, "ingest", str(src))
    assert (again.returncode, again.stdout) == (2, "")
    assert again.stderr.splitlines() == [
        "error: line 1: id: 'n0' already exists in default/default; use --replace to overwrite it",
        "error: line 2: id: 'n1' already exists in default/default; use --replace to overwrite it",
    ]
    assert run(db, "ingest", str(src), "--replace").returncode == 0
    assert entries(db) == 2


def test_an_existing_record_id_is_named_as_a_notes_is(tmp_path: Path) -> None:
    """A fact, knowledge, neuron, node or task line whose id exists gets the note's one-line message."""
    db, src = tmp_path / "r.db", tmp_path / "r.jsonl"
    lines = [
        {"record": "fact", "id": "f1", "text": "The tile cache runs on Redis 7.2."},
        {"record": "knowledge", "id": "k1", "provenance": ["f1"], "text": "The cache is Redis."},
        {"record": "neuron", "id": "u1", "triggers": ["flaky test"], "text": "Rerun flaky tests once."},
        {"record": "node", "id": "ana", "name": "Ana"},
        {"record": "task", "id": "t1", "description": "Migrate the billing db", "status": "completed"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    assert run(db, "ingest", str(src)).returncode == 0
    for record in lines:
        src.write_text(json.dumps(record) + "\n", encoding="utf-8")
        again = run(db, "ingest", str(src))
        assert (again.returncode, again.stderr) == (
            2,
            f"error: line 1: id: {record['id']!r} already exists in default/default; use --replace to overwrite it\n",
        )


def test_replace_gives_a_memorule_a_new_state_and_rewrites_a_task(tmp_path: Path) -> None:
    """--replace appends a memorule state (history kept) and rewrites a task without doubling its turns."""
    db, src = tmp_path / "m.db", tmp_path / "m.jsonl"
    examples = [json.loads(line) for line in doc_examples()]
    for record in examples:
        record.pop("written_by", None)  # a memorule that names no writer: the invocation's
    src.write_text(
        "".join(json.dumps(r) + "\n" for r in examples if r.get("record") in {"memorule", "task"}),
        encoding="utf-8",
    )
    refused = run(db, "ingest", str(src))
    assert (refused.returncode, refused.stdout) == (2, "")
    no_writer = "a memorule write names its writer: give --persona or set $CONTEXT_BROKER_PERSONA"
    assert refused.stderr.splitlines() == [f"error: --persona: {no_writer} (required)"]
    assert not db.exists()
    assert run(db, "ingest", str(src), "--persona", "donna").returncode == 0
    for record in examples:
        if record.get("id") == "rule-short-prs":
            record["body"] += " Split larger ones."
    src.write_text(
        "".join(json.dumps(r) + "\n" for r in examples if r.get("record") in {"memorule", "task"}),
        encoding="utf-8",
    )
    assert (
        run(db, "ingest", str(src), "--replace", "--persona", "texi", "--session-id", "s-2").returncode == 0
    )
    with MemoryStore.open(db, mode="lexical") as store:
        states = memorule_history(store, "rule-short-prs", namespace=NS)
        assert [s.version for s in states] == [1, 2]
        assert states[0].written_by_persona == "donna"
        assert states[0].written_by_session_id  # derived for the invocation
        assert (states[1].written_by_persona, states[1].written_by_session_id) == ("texi", "s-2")
        turns = anyio.run(
            lambda: SqliteTaskRepository.from_store(store).turns("task-notes-2-3-1", namespace=NS)
        )
    assert [t.role for t in turns] == ["user", "assistant"]


def test_replacing_a_memorule_with_its_own_fields_appends_no_state(tmp_path: Path) -> None:
    """Ingesting the same memorules again with --replace leaves each at one state and says so."""
    db, src = tmp_path / "m.db", tmp_path / "m.jsonl"
    lines = [line for line in doc_examples() if json.loads(line).get("record") == "memorule"]
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert run(db, "ingest", str(src), "--persona", "donna").returncode == 0
    again = run(db, "ingest", str(src), "--replace", "--persona", "texi")
    assert again.returncode == 0
    assert again.stdout.endswith(f": 0 written, {len(lines)} already stored\n")
    with MemoryStore.open(db, mode="lexical") as store:
        states = memorule_history(store, "rule-short-prs", namespace=NS)
    assert [s.version for s in states] == [1]


def test_replacing_notes_with_their_own_fields_rewrites_only_the_changed_ones(tmp_path: Path) -> None:
    """--replace leaves a note whose every given field is stored (counted already stored) and rewrites a changed one."""
    db, src = tmp_path / "n.db", tmp_path / "n.jsonl"
    notes = [
        {"id": f"n{i}", "text": t, "importance": 0.7, "metadata": {"k": i}} for i, t in enumerate(NOTES[:3])
    ]
    notes[0]["created_at"] = "2026-03-14T09:30:00Z"  # stored as ...+00:00: the same instant
    src.write_text("".join(json.dumps(n) + "\n" for n in notes), encoding="utf-8")
    assert run(db, "ingest", str(src)).returncode == 0
    with MemoryStore.open(db, mode="lexical") as store:
        first = store.get("n0", namespace=NS)
    again = run(db, "ingest", str(src), "--replace")
    assert (again.returncode, again.stdout.split(": ")[-1]) == (0, "0 written, 3 already stored\n")
    notes[1]["text"] += " and Saturday"
    notes[2]["metadata"] = {"k": "changed"}
    src.write_text("".join(json.dumps(n) + "\n" for n in notes), encoding="utf-8")
    changed = run(db, "ingest", str(src), "--replace")
    assert (changed.returncode, changed.stdout.split(": ")[-1]) == (0, "2 written, 1 already stored\n")
    with MemoryStore.open(db, mode="lexical") as store:
        assert store.get("n0", namespace=NS) == first
        assert store.get("n1", namespace=NS).text.endswith(" and Saturday")  # type: ignore[union-attr]
        assert store.get("n2", namespace=NS).metadata == {"k": "changed"}  # type: ignore[union-attr]
    assert entries(db) == 3


def test_a_bad_memorule_line_is_caught_before_anything_is_written(tmp_path: Path) -> None:
    """Memorule fields are validated with the notes, up front: one bad line, nothing written."""
    db, src = tmp_path / "b.db", tmp_path / "b.jsonl"
    rule = {
        "record": "memorule",
        "memorule_kind": "wish",
        "subject": "ab",
        "body": "long enough body",
        "applies_to": {},
    }
    src.write_text(json.dumps({"text": NOTES[0]}) + "\n" + json.dumps(rule) + "\n", encoding="utf-8")
    done = run(db, "ingest", str(src))
    assert done.returncode == 2
    assert any(
        line.startswith("error: line 2: memorule_kind: must be one of") for line in done.stderr.splitlines()
    )
    assert not db.exists()  # every line is checked before the store is opened


def test_a_note_record_of_kind_neuron_is_refused_and_pointed_to_the_neuron_record(tmp_path: Path) -> None:
    """A note line with `"kind": "neuron"` (no triggers: stored where no turn reads it) is one
    error naming the `neuron` record; nothing is written."""
    db, src = tmp_path / "n.db", tmp_path / "n.jsonl"
    src.write_text(json.dumps({"text": NOTES[0], "kind": "neuron"}) + "\n", encoding="utf-8")
    done = run(db, "ingest", str(src))
    assert done.returncode == 2
    assert any(
        line.startswith("error: line 1: kind: a neuron needs trigger phrases")
        for line in done.stderr.splitlines()
    )
    assert not db.exists() or MemoryStore.open(db, mode="lexical").stats()["entries"] == 0


def test_every_bad_record_value_is_reported_before_anything_is_written(tmp_path: Path) -> None:
    """A fact's half triple, a neuron's importance, a knowledge item's empty provenance, a node's
    wordless name and an edge's self-loop are all reported, one line each, and nothing is written."""
    db, src = tmp_path / "r.db", tmp_path / "r.jsonl"
    lines = [
        {"text": NOTES[0]},
        {"record": "fact", "subject": "the cache", "predicate": "runs"},
        {"record": "neuron", "text": "Rerun flaky tests once.", "triggers": ["flaky"], "importance": 5},
        {"record": "knowledge", "text": "Deploys freeze on Fridays.", "provenance": []},
        {"record": "node", "id": "x", "name": "the"},
        {"record": "edge", "src": "x", "relation": "owns", "dst": "x"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    done = run(db, "ingest", str(src))
    assert done.returncode == 2
    assert [line.split(":")[1].strip() for line in done.stderr.splitlines()[:-1]] == [
        "line 2",
        "line 3",
        "line 4",
        "line 5",
        "line 6",
    ]
    assert "error: line 6: dst: an edge joins two nodes (self_loop)" in done.stderr.splitlines()
    assert done.stderr.splitlines()[-1].endswith("nothing was written")
    assert not db.exists()


def test_a_null_field_is_judged_before_anything_is_written(tmp_path: Path) -> None:
    """A required field given as null is missing; an optional null is what the writer gets, so
    the check up front refuses what the writer would: every line named, nothing written."""
    db, src = tmp_path / "z.db", tmp_path / "z.jsonl"
    lines = [
        {"record": "fact", "text": "The tile cache runs on Redis 7.2."},
        {"record": "knowledge", "text": None, "provenance": ["x"]},
        {"record": "node", "name": None},
        {"record": "neuron", "text": "Rerun flaky tests once.", "triggers": ["flaky"], "importance": None},
        {"record": "edge", "src": None, "relation": "owns", "dst": "x"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    done = run(db, "ingest", str(src))
    assert done.returncode == 2
    errors = done.stderr.splitlines()
    assert "error: line 2: text: required for a knowledge record" in errors
    assert "error: line 3: name: required for a node record" in errors
    assert any(e.startswith("error: line 4: importance:") for e in errors)
    assert "error: line 5: src: required for an edge record" in errors
    assert "Traceback" not in done.stderr
    assert not db.exists()


def test_replace_refuses_a_note_id_the_file_gives_twice(tmp_path: Path) -> None:
    """With --replace, an id given twice is refused even when one of its lines is stored as it is."""
    db, src = tmp_path / "d.db", tmp_path / "d.jsonl"
    src.write_text(json.dumps({"id": "n1", "text": NOTES[0]}) + "\n", encoding="utf-8")
    assert run(db, "ingest", str(src)).returncode == 0
    twice = [{"id": "n1", "text": NOTES[1]}, {"id": "n1", "text": NOTES[0]}]
    src.write_text("".join(json.dumps(r) + "\n" for r in twice), encoding="utf-8")
    done = run(db, "ingest", str(src), "--replace")
    assert done.returncode == 2
    assert "error: line 2: id: 'n1' repeats line 1 (duplicate)" in done.stderr.splitlines()


def test_replace_rewrites_a_note_whose_metadata_changed_only_in_type(tmp_path: Path) -> None:
    """Metadata `{"x": true}` and `{"x": 1}` compare equal in Python, not as stored JSON: rewritten."""
    db, src = tmp_path / "t.db", tmp_path / "t.jsonl"
    src.write_text(
        json.dumps({"id": "n1", "text": NOTES[0], "metadata": {"x": True}}) + "\n", encoding="utf-8"
    )
    assert run(db, "ingest", str(src)).returncode == 0
    src.write_text(json.dumps({"id": "n1", "text": NOTES[0], "metadata": {"x": 1}}) + "\n", encoding="utf-8")
    done = run(db, "ingest", str(src), "--replace")
    assert done.stdout.split(": ")[-1] == "1 written, 0 already stored\n"
    with MemoryStore.open(db, mode="lexical") as store:
        assert json.dumps(store.get("n1", namespace=NS).metadata) == '{"x": 1}'  # type: ignore[union-attr]


def test_a_tasks_status_and_roles_and_a_repeated_record_id_are_refused_up_front(tmp_path: Path) -> None:
    """A task's unknown status or turn role, and an id two node lines share, are listed with the
    rest before anything is written."""
    db, src = tmp_path / "k.db", tmp_path / "k.jsonl"
    lines = [
        {"text": NOTES[0]},
        {"record": "task", "id": "t1", "description": "Do it", "turns": [["robot", "hi"]]},
        {"record": "task", "id": "t2", "description": "Other", "status": "done"},
        {"record": "node", "id": "n", "name": "Alpha"},
        {"record": "node", "id": "n", "name": "Beta"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    for flags in ((), ("--replace",)):
        done = run(db, "ingest", str(src), *flags)
        assert done.returncode == 2
        errors = done.stderr.splitlines()
        assert [e.split(":")[1].strip() for e in errors[:-1]] == ["line 2", "line 3", "line 5"]
        assert "error: line 5: id: 'n' repeats line 4 (duplicate)" in errors
        assert not db.exists()


def test_ingest_reads_standard_input_with_a_byte_order_mark(tmp_path: Path) -> None:
    """`ingest -` reads standard input; a UTF-8 BOM before the first line is accepted."""
    db = tmp_path / "s.db"
    data = b"\xef\xbb\xbf" + notes_file(tmp_path).read_bytes()
    done = run(db, "ingest", "-", "--json", stdin=data)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "records": len(NOTES),
        "written": len(NOTES),
        "unchanged": 0,
        "tenant": "default",
        "project": "default",
    }
    assert entries(db) == len(NOTES)


def test_a_latin1_file_names_the_line_that_is_not_utf8(tmp_path: Path) -> None:
    """A latin-1 byte is reported with its line and column; nothing is written."""
    db, src = tmp_path / "l.db", tmp_path / "latin1.jsonl"
    src.write_bytes(b'{"text": "plain ascii line"}\n{"text": "caf\xe9 au lait"}\n')
    done = run(db, "ingest", str(src))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: {src}: line 2: not UTF-8 (byte 0xe9 at column 14)",
        f"error: {src}: save it as UTF-8",
    ]
    assert not db.exists()


def test_a_new_database_logs_no_migrations_at_the_default_level(tmp_path: Path) -> None:
    """Creating a database prints no store.migrated lines unless --log-level debug asks for them."""
    quiet = run(tmp_path / "q.db", "ingest", str(notes_file(tmp_path)))
    assert quiet.returncode == 0, quiet.stderr
    assert "store.migrat" not in quiet.stderr
    loud = run(tmp_path / "l.db", "--log-level", "debug", "remember", "a first note")
    migrated = [
        json.loads(line)["to_version"] for line in loud.stderr.splitlines() if "store.migrated" in line
    ]
    assert migrated == list(range(1, SCHEMA_VERSION + 1))


def many_notes(tmp_path: Path) -> Path:
    return notes_file(tmp_path, [f"note number {i} about topic {i % 37}" for i in range(PROGRESS_MIN_NOTES)])


def test_progress_is_a_few_plain_lines_when_not_a_terminal(tmp_path: Path) -> None:
    """Piped stderr gets at most one progress line per tenth, each with rate and time left."""
    done = run(tmp_path / "p.db", "ingest", str(many_notes(tmp_path)))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("ingest: ")]
    assert 1 <= len(lines) <= 10
    assert re.fullmatch(
        rf"ingest: {PROGRESS_MIN_NOTES}/{PROGRESS_MIN_NOTES} lines \(100%\), \d+ lines/s", lines[-1]
    )
    assert all("\r" not in line for line in lines)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_is_a_live_bar_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal stderr gets a redrawn bar with the rate, not plain lines."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # rows, columns
    env = {**os.environ, "CONTEXT_BROKER_DB": str(tmp_path / "t.db")}
    with subprocess.Popen(
        [sys.executable, "-m", "context_broker", "ingest", str(many_notes(tmp_path))],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    ) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=300)
    os.close(leader)
    terminal = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, terminal
    assert "\r" in terminal
    assert re.search(rf"{PROGRESS_MIN_NOTES}/{PROGRESS_MIN_NOTES} \[", terminal)
    assert "lines/s" in terminal
    assert not re.search(r"ingest: \d+/\d+ lines \(", terminal)  # no plain lines


def test_a_record_failing_after_notes_were_written_says_what_stays(tmp_path: Path) -> None:
    """An edge to a missing node fails at its line; the message says the notes before it stay."""
    db, src = tmp_path / "e.db", tmp_path / "e.jsonl"
    src.write_text(
        json.dumps({"text": NOTES[0]})
        + "\n"
        + json.dumps({"record": "edge", "src": "a", "relation": "r", "dst": "b"})
        + "\n",
        encoding="utf-8",
    )
    done = run(db, "ingest", str(src))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: line 2: src: no node 'a' in default/default (not_found)",
        "error: line 2: dst: no node 'b' in default/default (not_found)",
        "error: the 1 record written before line 2 stays; fix the line and ingest again with --replace",
    ]
    assert entries(db) == 1


def test_a_memorule_record_names_its_writer_or_is_refused_for_a_bad_one(tmp_path: Path) -> None:
    """`written_by` names a memorule's writer (no --persona needed, the audit records it); one
    missing its session id or holding an unknown key is refused, naming the line, nothing written."""
    rule = {
        "record": "memorule",
        "memorule_kind": "convention",
        "subject": "UTC timestamps",
        "body": "Write every timestamp in UTC with an explicit offset.",
        "applies_to": {"scope": "global"},
    }
    src, db = tmp_path / "r.jsonl", tmp_path / "r.db"
    bad = [
        {**rule, "written_by": {"persona": "ops"}},
        {**rule, "written_by": {"persona": "ops", "session_id": "s", "x": 1}},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in bad), encoding="utf-8")
    refused = run(db, "ingest", str(src))
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[:2] == [
        "error: line 1: written_by.session_id: required",
        "error: line 2: written_by.x: unknown field (persona, session_id)",
    ]
    assert not db.exists()
    src.write_text(
        json.dumps({**rule, "written_by": {"persona": "ops", "session_id": "s-1"}}) + "\n", encoding="utf-8"
    )
    assert run(db, "ingest", str(src)).returncode == 0, "a record naming its writer needs no --persona"
    audit = json.loads(run(db, "audit", "--json").stdout)
    assert [(e["written_by_persona"], e["written_by_session_id"]) for e in audit] == [("ops", "s-1")]


def test_a_repeated_note_id_and_a_missing_writer_are_listed_with_the_bad_lines(tmp_path: Path) -> None:
    """Every problem of a file in one run: a bad field, a note id given twice, and a memorule with
    no writer (no --persona), then that nothing was written."""
    db, src = tmp_path / "r.db", tmp_path / "r.jsonl"
    lines = [
        {"id": "n1", "text": NOTES[0]},
        {"id": "n1", "text": NOTES[1]},
        {"text": NOTES[2], "importance": 5},
        {
            "record": "memorule",
            "id": "rule-short-prs",
            "memorule_kind": "preference",
            "subject": "short pull requests",
            "body": "Keep pull requests under 300 lines.",
            "applies_to": {"scope": "project"},
            "confidence": "observed",
        },
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    done = run(db, "ingest", str(src))  # `run` clears $CONTEXT_BROKER_PERSONA
    errors = done.stderr.splitlines()
    assert done.returncode == 2
    assert errors[0].startswith("error: line 3: importance:")
    assert "error: line 2: id: 'n1' repeats line 1 (duplicate)" in errors
    assert any(e.startswith("error: --persona: a memorule write names its writer") for e in errors)
    assert errors[-1].endswith("nothing was written")
    assert not db.exists()
