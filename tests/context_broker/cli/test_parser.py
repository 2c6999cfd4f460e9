"""The parser as a user meets it, through a real subprocess: --version, help, global options
anywhere, the one deadline default, and errors that name the flag that was typed."""

from __future__ import annotations

import inspect
import subprocess
from typing import TYPE_CHECKING

import pytest
from cli_subprocess import run_on

from broker import open_selector
from context_broker._cli._options import DEFAULT_DEADLINE_MS, SELECT_BUDGET, field_label, flag_names
from context_broker._cli._parser import build_parser, version

if TYPE_CHECKING:
    from pathlib import Path


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_on(tmp_path / "p.db", *args)


def test_version_prints_the_installed_version(tmp_path):
    """`--version` prints the program name and the distribution's version, exit 0."""
    done = run(tmp_path, "--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"context-broker {version()}")
    assert version()[0].isdigit()


@pytest.mark.parametrize("command", ["recall", "select", "demo", "ingest", "stats", "memorule update"])
def test_every_subcommand_help_lists_the_global_options(tmp_path, command):
    """Subcommand help shows --db, --tenant, --project, --trace-file, --trace-text and --log-level."""
    done = run(tmp_path, *command.split(), "--help")
    assert done.returncode == 0, done.stderr
    assert "global options (also accepted before COMMAND)" in done.stdout
    for flag in ("--db", "--tenant", "--project", "--trace-file", "--trace-text", "--log-level"):
        assert flag in done.stdout


def test_recall_help_explains_query_and_limit(tmp_path):
    """`recall --help` says what QUERY and --limit are."""
    done = run(tmp_path, "recall", "--help")
    assert "QUERY                 the text to recall memories for" in done.stdout
    assert "--limit N             most memories to print" in done.stdout


def test_budget_helps_say_memories_versus_tokens(tmp_path):
    """`select --budget` counts memories and `demo --input-budget` counts tokens, and help says so."""
    select = " ".join(run(tmp_path, "select", "--help").stdout.split())
    demo = " ".join(run(tmp_path, "demo", "--help").stdout.split())
    assert "a count of memories, not tokens" in select
    assert "a count of tokens, not memories" in demo


def test_demo_and_select_share_one_deadline_default(tmp_path):
    """Both commands default --deadline-ms to the library's deadline, and both help texts say so."""
    defaults = {
        command: build_parser().parse_args([command, "t"]).deadline_ms for command in ("demo", "select")
    }
    assert defaults == {"demo": DEFAULT_DEADLINE_MS, "select": DEFAULT_DEADLINE_MS}
    assert inspect.signature(open_selector).parameters["deadline"].default * 1000 == DEFAULT_DEADLINE_MS
    for command in ("demo", "select"):
        assert f"(default {DEFAULT_DEADLINE_MS:g})" in " ".join(
            run(tmp_path, command, "--help").stdout.split()
        )


@pytest.mark.parametrize("command", ["demo", "select"])
def test_zero_deadline_names_the_flag(tmp_path, command):
    """`--deadline-ms 0` exits 2 with one line naming --deadline-ms, nothing opened."""
    done = run(tmp_path, command, "a task", "--deadline-ms", "0")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: --deadline-ms: must be a finite number of milliseconds > 0, got 0\n"
    assert not (tmp_path / "p.db").exists()


def test_a_trace_file_that_cannot_be_opened_is_one_line_naming_the_path(tmp_path):
    """A directory or a missing directory as --trace-file: exit 2, one line with the path and the
    reason (it printed Python's `[Errno 21] Is a directory: '...'`)."""
    for target, reason in (
        (tmp_path, "Is a directory"),
        (tmp_path / "no" / "t.jsonl", "No such file or directory"),
    ):
        done = run(tmp_path, "--trace-file", str(target), "select", "a task")
        assert (done.returncode, done.stderr) == (2, f"error: --trace-file: {target}: {reason}\n")


def test_a_store_named_as_the_trace_file_is_refused_and_left_intact(tmp_path):
    """`--trace-file` naming a SQLite database (the store itself) exits 2 with one line and the
    file unchanged (it was opened for appending JSON lines to the database's pages)."""
    db = tmp_path / "m.db"
    assert (
        run(tmp_path, "--db", str(db), "remember", "The staging database restores on Sundays").returncode == 0
    )
    before = db.read_bytes()
    done = run(tmp_path, "--db", str(db), "--trace-file", str(db), "select", "staging restores")
    assert (done.returncode, done.stderr) == (
        2,
        f"error: --trace-file: {db}: a SQLite database, not a trace file (nothing was written)\n",
    )
    assert db.read_bytes() == before


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--frobnicate"], "error: unrecognized arguments: --frobnicate\n"),
        (["--tenant", "t", "--frob=1"], "error: unrecognized arguments: --frob=1\n"),
        ([], "error: the following arguments are required: COMMAND\n"),
        (["--ten", "t"], "error: the following arguments are required: COMMAND\n"),
        (["--tenant", "-5", "--frob"], "error: unrecognized arguments: --frob\n"),
        (["memorule", "--frob"], "error: unrecognized arguments: --frob\n"),
        (["memorule"], "error: the following arguments are required: ACTION\n"),
    ],
)
def test_an_unknown_option_without_a_command_is_named(tmp_path, argv, line):
    """`context-broker --frobnicate` names the option, not only the missing COMMAND (exit 2)."""
    done = run(tmp_path, *argv)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line)


def test_global_options_after_a_nested_subcommand(tmp_path):
    """--tenant and --db given after `memorule history ID` are honoured, not rejected."""
    db = tmp_path / "other.db"
    assert run(tmp_path, "remember", "a note", "--db", str(db)).returncode == 0
    done = run(tmp_path, "memorule", "history", "nope", "--tenant", "t2", "--db", str(db))
    assert done.returncode == 2  # not found: bad input
    assert "in t2/default" in done.stderr
    assert not (tmp_path / "p.db").exists()  # the default database was never used


def test_memorule_errors_name_the_flags_typed(tmp_path):
    """A bad memorule names --memorule-kind, --subject, --applies-to: the flags, not Python fields."""
    done = run(tmp_path, "remember", "--kind", "memorule", "--memorule-kind", "nope", "--body", "x" * 12)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: --memorule-kind: must be one of ")
    assert "error: --subject: is required for kind 'memorule' (required)" in lines
    assert "error: --applies-to: is required for kind 'memorule' (required)" in lines
    assert "memorule_kind" not in done.stderr


def test_an_empty_task_names_the_task_argument(tmp_path):
    """`demo ""` names the TASK argument, not the repository's `description` field."""
    done = run(tmp_path, "demo", "  ", "--mode", "lexical")
    assert (done.returncode, done.stderr) == (2, "error: TASK: must not be empty (empty)\n")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (("select", " "), "error: TASK: must not be empty (empty)"),
        (("explain", " "), "error: TASK: must not be empty (empty)"),
        (("explain", "a task", "--message", " "), "error: --message: must not be empty (empty)"),
        (("demo", "a task", "--message", " "), "error: --message: must not be empty (empty)"),
    ],
)
def test_every_command_words_an_empty_task_or_message_alike(tmp_path, argv, line):
    """`select`, `explain` and `demo` refuse an empty TASK or --message with the same line, exit 2."""
    done = run(tmp_path, *argv)
    assert (done.returncode, done.stderr.splitlines()) == (2, [line])


def test_field_label_keeps_the_index_and_leaves_unknown_fields():
    """`applies_to[1]` -> `--applies-to[1]`; a field no option carries stays as it is."""
    flags = flag_names(build_parser()._subparsers._group_actions[0].choices["remember"])
    assert field_label("applies_to[1]", flags) == "--applies-to[1]"
    assert field_label("memorule_kind", flags) == "--memorule-kind"
    assert field_label("text", flags) == "TEXT"
    assert field_label("provenance[0]", flags) == "provenance[0]"


def test_explain_takes_as_many_memories_as_select_by_default() -> None:
    """`explain` shows the turn `select` runs: the same default budget."""
    parser = build_parser()
    assert parser.parse_args(["explain", "a task"]).budget == SELECT_BUDGET
    assert parser.parse_args(["select", "a task"]).budget == SELECT_BUDGET
