"""`select` at scale: a first turn from the CLI on a 20k-memory store meets the default deadline."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _synthetic
from broker import RECALL_MIN_SCORE, SelectionResult, SourceOutcome, SourceStatus
from context_broker._cli import _select_cmds
from context_broker._cli._app import App
from context_broker._cli._select_cmds import _print_human
from sources.embedding._embedder import load_default_embedder

ROOT = Path(__file__).resolve().parents[3]
N = 20_000
TASKS = 3


@pytest.mark.slow
def test_first_select_on_a_20k_store_completes_at_the_default_deadline(tmp_path: Path) -> None:
    """Nothing loads cold inside the deadline: every source of a fresh process's first turn answers."""
    embedder = load_default_embedder()
    gen = _synthetic.Generator(seed=7)
    recycled = embedder.embed([gen.memory() for _ in range(64)])
    pool = _synthetic.real_pool(embedder.embed, recycled).at(_synthetic.split(N)["store"])
    db = tmp_path / "s.db"
    _synthetic.build(db, N, gen, texts=pool.stored, pool=pool.vectors, model_id=embedder.model_id)
    ns = _synthetic.NS
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for task, _ in gen.tasks(TASKS * 4, ["hi"], pool.tasks)[:TASKS]:
        where = ["--db", str(db), "--tenant", ns.tenant_id, "--project", ns.project_id]
        out = subprocess.run(
            [sys.executable, "-m", "context_broker", *where, "select", "--json", task],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            timeout=120,
        )
        statuses = {s["name"]: s["status"] for s in json.loads(out.stdout)["sources"]}
        assert set(statuses.values()) <= {"ok", "empty"}, (task, statuses)


def test_a_batch_reports_every_problem_of_every_line_in_field_order(tmp_path: Path, cli) -> None:
    """`select --batch` names each bad line's problems in one fixed order, before any store opens."""
    batch = tmp_path / "b.jsonl"
    lines = [
        {
            "task": "ok",
            "colour": 1,
            "types": ["semantic", "x"],
            "budget": 0,
            "mode": "fast",
            "persona": 3,
            "tenant": "",
        },
        {"task": "", "message": 5},
    ]
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines) + "nope\n[1]\n", encoding="utf-8")
    ran = cli("--db", str(tmp_path / "never.db"), "select", "--batch", str(batch))
    assert (ran.status, ran.out) == (2, "")
    assert ran.err_lines == (
        "error: line 1: colour: unknown field",
        "error: line 1: types: must be a non-empty list (or comma-separated string) of episodic, semantic, procedural, self, personality, associative",
        "error: line 1: budget: must be an integer in 1..1000 (out_of_range)",
        "error: line 1: mode: must be one of lexical, dense, hybrid",
        "error: line 1: persona: must be a string",
        "error: line 1: tenant: must be a non-empty string",
        "error: line 2: task: must not be empty (empty)",
        "error: line 2: message: must be a string (type)",
        "error: line 3: invalid JSON (Expecting value at column 1)",
        "error: line 4: must be a JSON object",
    )
    assert not (tmp_path / "never.db").exists()


def test_a_batch_line_without_a_task_says_the_task_is_required(tmp_path: Path, cli) -> None:
    """A line that names no task reads "required", not a type error about a missing value."""
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"message": "hello"}) + "\n", encoding="utf-8")
    ran = cli("--db", str(tmp_path / "never.db"), "select", "--batch", str(batch))
    assert (ran.status, ran.err_lines) == (2, ("error: line 1: task: required (the line's task text)",))


def _nothing_selected(statuses: tuple[SourceStatus, ...]) -> SelectionResult:
    """A turn that selected nothing, its sources s0, s1, ... ending with `statuses`."""
    return SelectionResult(
        blocks=(),
        candidates_evaluated=0,
        types_queried=None,
        sources=tuple(SourceOutcome(name=f"s{i}", status=s, latency_ms=1.0) for i, s in enumerate(statuses)),
    )


@pytest.mark.parametrize(
    ("statuses", "said"),
    [
        ((SourceStatus.TIMEOUT, SourceStatus.FAILED), "no memories: no source answered"),
        ((SourceStatus.TIMEOUT, SourceStatus.EMPTY), "abstained: nothing relevant"),
    ],
)
def test_a_turn_no_source_answered_is_not_called_an_abstention(
    capsys: pytest.CaptureFixture[str], statuses: tuple[SourceStatus, ...], said: str
) -> None:
    """Zero memories because every source timed out or failed reads as that, not as 'nothing relevant'."""
    result = _nothing_selected(statuses)
    _print_human(App(args=argparse.Namespace()), result)
    assert capsys.readouterr().out.startswith(said)


def test_select_json_gives_a_moved_turns_own_score(tmp_path: Path) -> None:
    """`select --json` says, as `explain --json` does, the score of a turn's own words when its
    conversation context ranked it elsewhere (None for a memory that kept its own)."""
    turns = [
        "Mel: How was the pottery class on Saturday?",
        "Caroline: Loved it, I made a bowl for my mom.",
        *(f"Speaker: topic {i} and the weather in town {i}" for i in range(30)),
        "Caroline: I made dinner for my mom.",
    ]
    lines = [json.dumps({"id": f"t{i}", "text": t, "memory_type": "episodic"}) for i, t in enumerate(turns)]
    (tmp_path / "turns.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = str(tmp_path / "m.db")
    env = {**os.environ, "HOME": str(tmp_path)}
    cli = [sys.executable, "-m", "context_broker", "--db", db]
    assert (
        subprocess.run([*cli, "ingest", str(tmp_path / "turns.jsonl")], env=env, check=False).returncode == 0
    )
    task = ["select", "What did Caroline make in her pottery class?", "--mode", "lexical", "--json"]
    done = subprocess.run(
        [*cli, *task, "--deadline-ms", "60000"], env=env, capture_output=True, text=True, check=False
    )
    blocks = json.loads(done.stdout)["blocks"]
    moved = {b["entry_id"]: b for b in blocks if b["own_score"] is not None}
    assert "t1" in moved
    assert moved["t1"]["own_score"] < moved["t1"]["score"]
    assert all(b["own_score"] is None or b["own_score"] != b["score"] for b in blocks)


def test_an_abstention_names_the_gate_that_kept_memories_out(capsys: pytest.CaptureFixture[str]) -> None:
    """A turn whose gate stayed under the floor says by how much, beside the candidates it weighed."""
    result = SelectionResult(
        blocks=(),
        candidates_evaluated=2,
        types_queried=None,
        sources=(SourceOutcome(name="store", status=SourceStatus.EMPTY, latency_ms=1.0),),
        qpp=0.026,
    )
    _print_human(App(args=argparse.Namespace()), result)
    assert capsys.readouterr().out.startswith(
        f"abstained: nothing relevant (gate 0.026 < floor {RECALL_MIN_SCORE}; 2 candidates evaluated)"
    )


def test_an_abstention_with_sources_that_did_not_answer_names_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing selected while some sources timed out: the turn says which, not only 'nothing relevant'."""
    statuses = (SourceStatus.TIMEOUT, SourceStatus.EMPTY, SourceStatus.FAILED)
    result = _nothing_selected(statuses)
    _print_human(App(args=argparse.Namespace()), result)
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith("abstained: nothing relevant")
    assert said[1] == (
        "2 of 3 sources did not answer (s0=timeout, s2=failed): their memories are missing here; "
        "a longer --deadline-ms may help"
    )


def test_a_batch_prints_each_result_before_the_next_turn_runs(tmp_path: Path, cli, monkeypatch) -> None:
    """`select --batch` streams: line 1's result is printed before line 2's turn starts."""
    db = str(tmp_path / "s.db")
    assert cli("--db", db, "remember", "Deploys freeze every Friday after the payment incident").status == 0
    batch = tmp_path / "b.jsonl"
    batch.write_text('{"task": "deploy freeze"}\n{"task": "payment incident"}\n', encoding="utf-8")
    events: list[str] = []
    turn, printed = _select_cmds._one, App.print_json

    async def one(selector, job):
        events.append(f"turn {job.line}")
        return await turn(selector, job)

    def print_json(value: object) -> None:
        events.append(f"printed {value['line']}")  # type: ignore[index]
        printed(value)

    monkeypatch.setattr(_select_cmds, "_one", one)
    monkeypatch.setattr(App, "print_json", staticmethod(print_json))
    ran = cli("--db", db, "select", "--batch", str(batch), "--mode", "lexical")
    assert ran.status == 0, ran.err_lines
    assert events == ["turn 1", "printed 1", "turn 2", "printed 2"]
