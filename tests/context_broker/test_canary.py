from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from broker import _admission, _broker, _floor, _selector
from context_broker import canary

EXPECTED_CHECKS = (
    "past-task-memories-recallable",
    "one-trace-event-per-turn",
    "recall-keyed-on-the-active-task",
    "trivial-task-abstains",
    "importance-never-injects",
    "task-state-supremacy",
    "memory-sub-budget",
    "failing-source-is-data",
    "floor-holds",
)
"""Every invariant the canary must check: removing one from `canary.CHECKS` fails this file."""


def missing_checks(names) -> list[str]:
    return [name for name in EXPECTED_CHECKS if name not in names]


CI_SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "run"
CANARY = ["-m", "context_broker.canary"]
SEPARATORS = {"&&", "||", ";", "|"}


def runs_the_canary(script: str) -> bool:
    """Whether a shell script has a command line `python -m context_broker.canary` (comments
    and quoted text do not count)."""
    for line in script.splitlines():
        command: list[str] = []
        for word in [*shlex.split(line, comments=True), ";"]:
            if word not in SEPARATORS:
                command.append(word)
                continue
            if command[:1] and Path(command[0]).name.startswith("python") and command[1:3] == CANARY:
                return True
            command = []
    return False


def test_ci_runs_the_canary():
    """`.ci/run` runs `python -m context_broker.canary` as a command, so CI fails when the canary does."""
    assert runs_the_canary(CI_SCRIPT.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("script", "runs"),
    [
        ("python -m context_broker.canary\n", True),
        ("ruff check . && python3 -m context_broker.canary\n", True),
        ("# python -m context_broker.canary\n", False),
        ("ruff check .  # then python -m context_broker.canary\n", False),
        ("echo 'python -m context_broker.canary'\n", False),
        ("python -m context_broker.canary_old\n", False),
    ],
)
def test_the_ci_check_counts_commands_not_comments(script, runs):
    """A commented-out or echoed canary line does not pass for the canary being run."""
    assert runs_the_canary(script) is runs


def test_canary_passes_in_a_fresh_process():
    """`python -m context_broker.canary` prints exactly `canary ok` and exits 0."""
    done = subprocess.run(
        [sys.executable, "-m", "context_broker.canary"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "canary ok\n"


def test_canary_reports_a_broken_memory_budget(monkeypatch, capsys):
    """With the memory sub-budget disabled, the canary exits 1 with a line naming it."""
    real = _admission.admit

    def no_memory_budget(blocks, *, memory_budget, input_budget):
        return real(blocks, memory_budget=input_budget, input_budget=input_budget)

    monkeypatch.setattr(_broker._admission, "admit", no_memory_budget)
    assert canary.main() == 1
    err = capsys.readouterr().err
    assert "canary violation: memory sub-budget broken" in err


def test_canary_reports_recall_keyed_on_past_tasks(monkeypatch, capsys):
    """If memory were keyed on past-task text, the canary would catch the leak."""
    original = _broker.ContextBroker._memory

    async def keyed_on_history(self, turn, task, deadline):
        past = await self._tasks.completed_tasks(namespace=turn.namespace, limit=1)
        if past:
            task = _broker.attrs.evolve(task, description=f"{task.description} {past[0].description}")
        return await original(self, turn, task, deadline)

    monkeypatch.setattr(_broker.ContextBroker, "_memory", keyed_on_history)
    assert canary.main() == 1
    assert "canary violation: recall was keyed on" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["HOME", "XDG_DATA_HOME", "CONTEXT_BROKER_DB"])
def test_sandbox_restores_the_environment(monkeypatch, key):
    """The canary's temporary HOME and data dirs do not leak into the caller's environment."""
    monkeypatch.setenv(key, "/original")
    with canary._sandbox() as root:
        assert os.environ[key].startswith(str(root))
    assert os.environ[key] == "/original"


def test_every_expected_check_is_registered_and_runs():
    """The registry holds exactly the expected checks, and one canary run runs each, cleanly."""
    assert missing_checks(canary.CHECKS) == []
    assert tuple(canary.CHECKS) == EXPECTED_CHECKS
    report = canary.run()
    assert report.ran == EXPECTED_CHECKS
    assert report.violations == ()


def test_a_removed_check_is_caught(monkeypatch):
    """Deleting a check from the registry is what the test above refuses (CI fails, not the canary)."""
    monkeypatch.delitem(canary.CHECKS, "floor-holds")
    assert missing_checks(canary.CHECKS) == ["floor-holds"]


def test_a_check_name_registers_once():
    """Two checks under one name would hide one of them: registering refuses."""
    with pytest.raises(ValueError, match="registered twice"):
        canary.check("floor-holds")(lambda _c, _o: None)


def test_a_zero_floor_fails_the_canary(monkeypatch, capsys):
    """With the selector's floor replaced by 0, the below-floor candidate is selected and the
    canary exits 1 naming the broken floor."""
    monkeypatch.setattr(_selector, "select", functools.partial(_floor.select, floor=0.0))
    assert canary.main() == 1
    err = capsys.readouterr().err
    assert "canary violation: floor broken: below-floor (score 0.2 < floor 0.42)" in err


def test_a_moved_floor_constant_fails_the_canary(monkeypatch, capsys):
    """The canary pins the documented floor: a trace reporting another one is a violation."""
    monkeypatch.setattr(_broker, "RECALL_MIN_SCORE", 0.1)
    assert canary.main() == 1
    assert "canary violation: trace: floor is 0.1, not the documented 0.42" in capsys.readouterr().err
