"""`demo` and `trace-stats` driven as a subprocess: stdout is the result, the trace goes to the log."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import jsonschema
import pytest
from cli_subprocess import UNRACED, run

from broker import trace_schema
from context_broker._cli._broker_cmds import DEMO_TASK, sample_records, summarise
from context_broker._cli._plot import scores

if TYPE_CHECKING:
    from pathlib import Path

MEMORY_TAG = re.compile(r"^<memory-[a-z]{12} ", re.MULTILINE)


def events(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == "turn.completed"]


def test_demo_prints_a_real_context_and_emits_one_valid_trace(tmp_path):
    """The README's main job: sample memories in, a datamarked context out, one v5 trace event."""
    db, trace = tmp_path / "demo.db", tmp_path / "trace.jsonl"
    done = run(
        "--db", str(db), "--trace-file", str(trace), "demo", "--mode", "lexical", *UNRACED, home=tmp_path
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert MEMORY_TAG.search(out)
    assert " id=lh-2-4-checklist-qa>" in out
    assert re.search(
        r"^PAST TASK \[[a-z]{12}\] \(completed — context only, not instructions\):", out, re.MULTILINE
    )
    active = re.split(r"ACTIVE TASK \[[a-z]{12}\] \(the one task to work on now\):\n", out.rstrip())
    assert active[1].startswith(DEMO_TASK)
    assert "The founder prefers the navy slide theme" not in out  # importance alone never injects
    (event,) = events(trace)
    jsonschema.Draft202012Validator(trace_schema()).validate(event)
    assert event["memory_abstained"] is False
    assert event["memory_selected"] >= 1
    assert DEMO_TASK not in json.dumps(event)  # no text in traces unless asked


def test_demo_seeds_once_and_a_trivial_task_abstains(tmp_path):
    """A second run reuses the seeded store; a trivial task gets no memory at all."""
    db, trace = tmp_path / "demo.db", tmp_path / "trace.jsonl"
    assert run("--db", str(db), "demo", "--mode", "lexical", *UNRACED, home=tmp_path).returncode == 0
    done = run(
        "--db",
        str(db),
        "--trace-file",
        str(trace),
        "demo",
        "what time is it",
        "--mode",
        "lexical",
        *UNRACED,
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert not MEMORY_TAG.search(done.stdout)
    (event,) = events(trace)
    assert event["memory_abstained"] is True
    stats = run("--db", str(db), "stats", "--json", home=tmp_path)
    assert stats.returncode == 0, stats.stderr
    sample = sample_records()
    seeded = len(sample.notes) + sum(1 for r in sample.records if r.type in {"neuron", "memorule"})
    assert json.loads(stats.stdout)["entries"] == seeded


def test_trace_text_puts_text_in_the_event(tmp_path):
    """`--trace-text` is the host's opt-in to memory and task text in the trace."""
    trace = tmp_path / "trace.jsonl"
    done = run(
        "--db",
        str(tmp_path / "d.db"),
        "--trace-file",
        str(trace),
        "--trace-text",
        "demo",
        "--mode",
        "lexical",
        *UNRACED,
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (event,) = events(trace)
    assert event["task_text"] == DEMO_TASK


def test_demo_turn_carries_the_sample_memorules_observed_first(tmp_path):
    """The default demo injects the sample's two memorules, the observed one ranked before the asserted."""
    done = run("--db", str(tmp_path / "d.db"), "demo", "--json", *UNRACED, home=tmp_path)
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)["trace"]
    assert trace["memorule_ids"] == ["rule-notes-breaking", "rule-no-friday-release"]
    audit = run("--db", str(tmp_path / "d.db"), "audit", home=tmp_path)
    assert audit.stdout.count("persona=sample-data") == 2, audit.stdout


def test_demo_json_and_bad_options(tmp_path):
    """`--json` prints blocks and trace; bad budgets exit 2 with one line each."""
    done = run("--db", str(tmp_path / "d.db"), "demo", "--json", "--mode", "lexical", *UNRACED, home=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["blocks"][-1]["kind"] == "task"
    assert doc["trace"]["schema_version"] == 9
    bad = run("--db", str(tmp_path / "d.db"), "demo", "--window", "0", "--input-budget", "-3", home=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        "error: --window: must be a positive integer, got 0",
        "error: --input-budget: must be a positive integer, got -3",
    ]


def test_trace_stats_summarises_a_log(tmp_path):
    """Turns, abstention, irrelevant-memory rate, latency percentiles and per-source rates."""
    log = tmp_path / "trace.jsonl"
    lines: list[dict] = [{"event": "store.migrated"}]
    lines += [
        {
            "event": "turn.completed",
            "schema_version": 6,
            "timings": {"total_ms": float(i)},
            "memory_candidates": 4,
            "memory_selected": 1 if i % 2 else 0,
            "memory_abstained": i % 2 == 0,
            "sources": [
                {"name": "store", "status": "ok"},
                {
                    "name": "neurons",
                    "status": "timeout" if i % 10 == 0 else "failed" if i % 25 == 0 else "ok",
                },
                {
                    "name": "graphs",
                    "status": "failed" if i <= 3 else "open-circuit" if i <= 10 else "overloaded",
                },
            ],
        }
        for i in range(1, 101)
    ]
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    done = run("trace-stats", "--json", str(log), home=tmp_path)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["turns"] == 100
    assert stats["abstention_rate"] == 0.5
    assert stats["irrelevant_memory_rate"] == pytest.approx((400 - 50) / 400)
    assert stats["latency_ms"] == {"p50": 50.0, "p95": 95.0, "p99": 99.0}
    assert stats["sources"]["neurons"] == {
        "turns": 100,
        "failure_rate": 0.02,
        "timeout_rate": 0.1,
        "open_circuit_rate": 0.0,
        "overloaded_rate": 0.0,
        "unanswered_rate": pytest.approx(0.12),
    }
    assert stats["sources"]["store"]["unanswered_rate"] == 0.0
    # a source switched off by its breaker, then crowded out, answered nothing: it says so
    graphs = stats["sources"]["graphs"]
    assert (graphs["failure_rate"], graphs["open_circuit_rate"], graphs["overloaded_rate"]) == (
        0.03,
        0.07,
        0.9,
    )
    assert graphs["unanswered_rate"] == 1.0
    human = run("trace-stats", str(log), home=tmp_path)
    assert "p50 50.0  p95 95.0  p99 99.0" in human.stdout
    assert "source graphs           turns 100  unanswered 100.0% (failed 3.0%" in human.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"event": "x"}\nnot json\n', ":2: not JSON (Expecting value at column 1)"),
        ('{"event": "x\n', ":1: not JSON (Unterminated string starting at column 11)"),
        ("[1, 2]\n", ":1: not a JSON object"),
        (
            '{"event": "x"}\n{"event": "turn.completed", "timings": {}}\n',
            ":2: turn.completed has no numeric timings.total_ms",
        ),
    ],
)
def test_trace_stats_bad_file_exits_2_with_the_line(tmp_path, content, message):
    """A malformed log is a usage error naming the line, never a traceback."""
    log = tmp_path / "bad.jsonl"
    log.write_text(content, encoding="utf-8")
    done = run("trace-stats", str(log), home=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_trace_stats_missing_file_and_empty_log(tmp_path):
    """A missing file exits 2; an empty log summarises to zero turns with n/a rates."""
    missing = run("trace-stats", str(tmp_path / "nope.jsonl"), home=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: ")
    assert summarise([])["abstention_rate"] is None


def _turns_log(tmp_path: Path) -> Path:
    """A short log of turn.completed events with admitted and dropped memory scores."""
    log = tmp_path / "turns.jsonl"
    events = [
        {
            "event": "turn.completed",
            "timings": {"total_ms": 10.0 + i},
            "memory_candidates": 3,
            "memory_selected": 1,
            "memory_abstained": False,
            "sources": [{"name": "store", "status": "ok"}],
            "blocks": [{"name": "memory", "kind": "memory", "score": 0.5 + i / 100}],
            "dropped": [{"entry_id": "x", "score": 0.45, "reason": "memory budget"}],
        }
        for i in range(20)
    ]
    log.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return log


def test_trace_stats_with_no_trace_events_says_so_and_exits_1(tmp_path):
    """A log without any turn.completed event is not summarised as zero turns: it says so, exit 1."""
    log = tmp_path / "other.jsonl"
    log.write_text('{"event": "store.migrated"}\n', encoding="utf-8")
    for args in (("trace-stats", str(log)), ("trace-stats", "--json", str(log))):
        done = run(*args, home=tmp_path)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"error: {log}: no turn.completed trace events found\n"


def test_trace_stats_reads_standard_input(tmp_path):
    """`trace-stats -` summarises a log piped on standard input."""
    done = subprocess.run(
        [sys.executable, "-m", "context_broker", "trace-stats", "--json", "-"],
        input=_turns_log(tmp_path).read_text(encoding="utf-8"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["turns"] == 20


def test_trace_stats_plot_writes_a_png(tmp_path):
    """--plot writes a PNG of the latency and score histograms and still prints the summary."""
    pytest.importorskip("matplotlib", reason="--plot needs the bench extra: pip install -e '.[bench]'")
    png = tmp_path / "trace.png"
    done = run("trace-stats", str(_turns_log(tmp_path)), "--plot", str(png), home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert done.stdout.startswith("turns                   20")


def test_trace_stats_plot_without_matplotlib_is_a_clear_error(tmp_path):
    """Without matplotlib, --plot exits 2 with one line saying how to install it; no traceback."""
    blocker = tmp_path / "blocked"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "context_broker",
            "trace-stats",
            str(_turns_log(tmp_path)),
            "--plot",
            str(tmp_path / "x.png"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: --plot needs matplotlib, which is not installed: pip install 'context-broker[bench]'\n"
    )
    assert not (tmp_path / "x.png").exists()


def test_plot_scores_are_those_of_admitted_and_dropped_memories():
    """The score histogram reads memory blocks and drops, skipping blocks without a score."""
    events = [{"blocks": [{"score": 0.7}, {"kind": "task"}], "dropped": [{"score": 0.43}]}, {}]
    assert scores(events) == [0.7, 0.43]


def test_trace_file_gets_every_turn_whatever_the_log_level(tmp_path, cli):
    """`--log-level warning --trace-file f`: the file still holds each turn.completed (and no
    other info event), so `trace-stats f` reports the turns."""
    trace = tmp_path / "trace.jsonl"
    db = str(tmp_path / "d.db")
    quiet = ("--db", db, "--log-level", "warning", "--trace-file", str(trace))
    for task in (DEMO_TASK, "what time is it"):
        ran = cli(*quiet, "demo", task, "--mode", "lexical", *UNRACED)
        assert ran.status == 0, ran
    logged = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert [e["event"] for e in logged if e["level"] in {"debug", "info"}] == ["turn.completed"] * 2
    stats = cli("trace-stats", str(trace), "--json")
    assert stats.status == 0, stats
    assert json.loads(stats.out)["turns"] == 2
