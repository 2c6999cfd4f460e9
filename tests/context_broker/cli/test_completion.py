"""`completion bash|zsh` through a real subprocess, and the bash script run by a real bash."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest


def script(shell: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "context_broker", "completion", shell],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def complete(words: str) -> list[str]:
    """What the generated bash function offers for the last word of `context-broker <words>`."""
    probe = (
        f"{script('bash')}\n"
        f"COMP_WORDS=(context-broker {words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n"
        "_context_broker; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


bash_only = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@bash_only
@pytest.mark.parametrize(
    ("words", "offered"),
    [
        ("ing", ["ingest"]),
        ("--db x.db tra", ["trace-stats"]),
        ("memorule u", ["update"]),
        ("memorule update --memorule-k", ["--memorule-kind"]),
        ("recall --mode h", ["hybrid"]),
        ("--log-level w", ["warning"]),
        ("completion ''", ["bash", "zsh"]),
        ("ingest --rep", ["--replace"]),
        ("select --deadline-ms ''", []),
        ("ingest ''", []),
    ],
)
def test_bash_completes_commands_options_and_choices(words, offered):
    """Subcommands, each one's options and options' choices; values and files left to the shell."""
    assert complete(words) == offered


@bash_only
def test_every_subcommand_is_offered_at_the_top():
    """An empty word at the top offers every subcommand, the ones other modules register included."""
    offered = set(complete("''"))
    assert {"ingest", "recall", "select", "demo", "trace-stats", "stats", "memorule", "completion"} <= offered


def test_zsh_script_loads_bash_completion_first():
    """The zsh script enables bashcompinit, then registers the same function."""
    text = script("zsh")
    assert text.startswith("# context-broker completion for zsh")
    assert "autoload -U +X bashcompinit && bashcompinit" in text
    assert text.rstrip().endswith("complete -o default -F _context_broker context-broker")


def test_an_unknown_shell_is_a_usage_error():
    """`completion fish` exits 2 naming the argument and the shells offered."""
    done = subprocess.run(
        [sys.executable, "-m", "context_broker", "completion", "fish"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: SHELL: invalid choice: 'fish'")
