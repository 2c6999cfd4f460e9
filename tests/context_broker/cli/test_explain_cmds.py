"""`explain` driven as a subprocess: every candidate with its gate, band, score and fate."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

import pytest
from cli_subprocess import UNRACED, run

from broker import RECALL_MIN_SCORE
from context_broker._cli._app import App
from context_broker._cli._explain_cmds import _print

if TYPE_CHECKING:
    from pathlib import Path


NOTES = (
    "The billing database runs Postgres 13 on three nodes in Frankfurt.",
    "Upgrading Postgres needs a rehearsal on a restored backup first.",
    "The design team meets on Thursdays to review mockups.",
    "Lunch orders for the offsite are due on Friday.",
    "The Postgres connection pool is capped at 200 clients.",
)


def seeded(tmp_path: Path) -> Path:
    db = tmp_path / "m.db"
    lines = [json.dumps({"id": f"n{i}", "text": t}) for i, t in enumerate(NOTES)]
    (tmp_path / "notes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run("--db", str(db), "ingest", str(tmp_path / "notes.jsonl"), home=tmp_path)
    assert done.returncode == 0, done.stderr
    return db


def test_explain_lists_every_candidate_with_its_parts_and_fate(tmp_path: Path) -> None:
    """Each candidate carries qpp, band and score = qpp x band, and a fate; below-floor ones show too."""
    db = seeded(tmp_path)
    done = run(
        "--db",
        str(db),
        "explain",
        "How do we upgrade Postgres?",
        "--json",
        "--mode",
        "lexical",
        *UNRACED,
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["floor"] == RECALL_MIN_SCORE
    rows = report["candidates"]
    assert rows
    for row in rows:
        assert abs(row["score"] - row["qpp"] * row["band"]) < 1e-6
        expected = "selected" if row["score"] >= RECALL_MIN_SCORE else "below the floor"
        assert row["outcome"] in {expected, "deduplicated", "cut by the budget", "dropped at admission"}
    assert {"n1"} <= {r["entry_id"] for r in rows if r["outcome"] == "selected"}
    assert {s["name"] for s in report["sources"]} >= {"store", "past_tasks"}


def test_explain_text_says_the_gate_and_each_fate(tmp_path: Path) -> None:
    """The human output names the mode, the floor and qpp, and prints one line per candidate."""
    db = seeded(tmp_path)
    done = run(
        "--db",
        str(db),
        "explain",
        "How do we upgrade Postgres?",
        "--mode",
        "lexical",
        *UNRACED,
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert f"floor {RECALL_MIN_SCORE}" in done.stdout
    assert "selected" in done.stdout


def test_explain_text_columns_line_up_whatever_the_outcome(tmp_path: Path) -> None:
    """A long outcome ("deduplicated (kept from store)") widens its column: every row's entry starts under its header."""
    db = seeded(tmp_path)
    done = run(
        "--db",
        str(db),
        "explain",
        "How do we upgrade Postgres?",
        "--mode",
        "lexical",
        *UNRACED,
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("score "))
    rows = lines[header + 1 : next(i for i, line in enumerate(lines) if line.startswith("sources: "))]
    assert len({len(row.split("  ")[3]) for row in rows}) > 1, rows  # outcomes of unequal widths
    column = lines[header].index("source/entry")
    for row in rows:
        assert row[column - 2 : column] == "  ", row
        assert row[column] != " ", row
        assert "/" in row[column:].split()[0], row


def test_explain_rejects_an_empty_task_and_message(tmp_path: Path) -> None:
    """Bad input is one line per error and exit 2, never a traceback."""
    done = run("--db", str(tmp_path / "x.db"), "explain", " ", "--message", "", home=tmp_path)
    assert done.returncode == 2
    assert "TASK" in done.stderr
    assert "--message" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("budget", ["-3", "0", "1001"])
def test_explain_names_the_bad_budget_it_got(tmp_path: Path, budget: str) -> None:
    """A budget outside 1..1000 is refused with the value given and the range, as `select` refuses it."""
    for command in ("explain", "select"):
        done = run("--db", str(tmp_path / "x.db"), command, "a task", "--budget", budget, home=tmp_path)
        assert (done.returncode, done.stderr) == (
            2,
            f"error: --budget: must be an integer in 1..1000, got {budget}\n",
        )


def test_explain_is_quiet_and_lists_a_memory_two_sources_return_once(tmp_path: Path) -> None:
    """An unclassified note comes back from the store and the persona lane: one row, the second
    source named in `also_from`; stderr holds no trace unless --log-level info asks for it."""
    db = tmp_path / "p.db"
    assert (
        run("--db", str(db), "remember", "My dentist is Dr. Alvarez on Elm Street", home=tmp_path).returncode
        == 0
    )
    done = run("--db", str(db), "explain", "who is my dentist", "--json", *UNRACED, home=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    rows = json.loads(done.stdout)["candidates"]
    assert [(r["source"], r["also_from"], r["outcome"]) for r in rows] == [("store", ["persona"], "selected")]
    loud = run(
        "--db", str(db), "--log-level", "info", "explain", "who is my dentist", *UNRACED, home=tmp_path
    )
    assert [json.loads(line)["event"] for line in loud.stderr.splitlines()] == ["turn.completed"]
    assert "store+persona/" in loud.stdout


def test_a_memory_two_sources_return_under_the_floor_is_one_row_too(tmp_path: Path) -> None:
    """An unclassified note the store and the persona lane both score under the floor is one row
    naming both sources, not two rows."""
    db = tmp_path / "p.db"
    for text in ("My dentist is Dr. Alvarez on Elm Street", "The staging database restores on Sundays"):
        assert run("--db", str(db), "remember", text, home=tmp_path).returncode == 0
    done = run("--db", str(db), "explain", "who is my dentist", "--json", *UNRACED, home=tmp_path)
    rows = json.loads(done.stdout)["candidates"]
    under = [r for r in rows if r["outcome"] == "below the floor"]
    assert under
    assert len({r["entry_id"] for r in rows}) == len(rows)
    assert all(len([r["source"], *r["also_from"]]) == 2 for r in under)


def test_explain_checks_its_flags_before_opening_a_store(tmp_path: Path) -> None:
    """A bad flag is reported even when the store does not exist: flags first, then the file."""
    done = run("--db", str(tmp_path / "none.db"), "explain", "a task", "--deadline-ms", "0", home=tmp_path)
    assert (done.returncode, done.stderr) == (
        2,
        "error: --deadline-ms: must be a finite number of milliseconds > 0, got 0\n",
    )


def test_explain_says_when_a_turns_neighbours_ranked_it(tmp_path: Path) -> None:
    """A conversation turn that took another rank's score shows the score of its own words."""
    turns = [
        "Mel: How was the pottery class on Saturday?",
        "Caroline: Loved it, I made a bowl for my mom.",
        *(f"Speaker: topic {i} and the weather in town {i}" for i in range(30)),
        "Caroline: I made dinner for my mom.",
    ]
    lines = [json.dumps({"id": f"t{i}", "text": t, "memory_type": "episodic"}) for i, t in enumerate(turns)]
    (tmp_path / "turns.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = str(tmp_path / "m.db")
    assert run("--db", db, "ingest", str(tmp_path / "turns.jsonl"), home=tmp_path).returncode == 0
    task = ("explain", "What did Caroline make in her pottery class?", "--mode", "lexical", *UNRACED)
    report = json.loads(run("--db", db, *task, "--json", home=tmp_path).stdout)
    moved = {r["entry_id"]: r["own_score"] for r in report["candidates"] if r["own_score"] is not None}
    assert "t1" in moved
    assert moved["t1"] < next(r["score"] for r in report["candidates"] if r["entry_id"] == "t1")
    text = run("--db", db, *task, home=tmp_path).stdout
    assert f"raised by its neighbours (own score {moved['t1']:.3f})" in text
    assert "turns raised by their neighbours stand above it (own score" in text


def test_explain_says_no_source_answered_when_each_timed_out(capsys: pytest.CaptureFixture[str]) -> None:
    """No candidate because every source timed out reads as that, not as 'nothing shares the task's terms'."""
    report = {
        "task": "when is the freeze",
        "message": None,
        "mode": "hybrid",
        "floor": RECALL_MIN_SCORE,
        "qpp": None,
        "candidates": [],
        "sources": [{"name": "store", "status": "timeout"}, {"name": "graphs", "status": "failed"}],
    }
    _print(App(args=argparse.Namespace()), report)
    assert "no memories: no source answered" in capsys.readouterr().out
    report["sources"] = [{"name": "store", "status": "timeout"}, {"name": "graphs", "status": "empty"}]
    _print(App(args=argparse.Namespace()), report)
    said = capsys.readouterr().out
    assert "no source returned a candidate: the namespace holds no memory" in said
    assert "1 of 2 sources did not answer (store=timeout): their memories are missing here" in said
    assert '("thanks!")' in said


def test_explain_writes_no_turn_to_the_trace_file(tmp_path: Path) -> None:
    """The turn `explain` runs is not an agent's turn: `--trace-file` gets no `turn.completed`
    (trace-stats would count it), while its other events still pass at debug level."""
    db = seeded(tmp_path)
    trace = tmp_path / "trace.jsonl"
    common = ("--db", str(db), "--trace-file", str(trace), "--log-level", "debug")
    done = run(
        *common, "explain", "How do we upgrade Postgres?", "--mode", "lexical", *UNRACED, home=tmp_path
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert events
    assert [e for e in events if e["event"] == "turn.completed"] == []
    assert all("cli_explaining" not in e for e in events)


def test_explain_counts_what_the_turn_considered_as_select_does(tmp_path: Path) -> None:
    """`explain` reports `candidates_evaluated` equal to `select`'s for the same task (it listed
    fewer rows than select counted, with nothing saying why), in JSON and in its text."""
    db = seeded(tmp_path)
    task = ("How do we upgrade Postgres?", "--mode", "lexical", *UNRACED)
    explained = json.loads(run("--db", str(db), "explain", *task, "--json", home=tmp_path).stdout)
    selected = json.loads(run("--db", str(db), "select", *task, "--json", home=tmp_path).stdout)
    assert (
        explained["candidates_evaluated"] == selected["candidates_evaluated"] >= len(explained["candidates"])
    )
    text = run("--db", str(db), "explain", *task, home=tmp_path).stdout
    assert f"considered {selected['candidates_evaluated']} " in text
