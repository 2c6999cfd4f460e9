from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker import _admission, _broker, canary


def test_canary_passes_in_a_fresh_process():
    """`python -m broker.canary` prints exactly `canary ok` and exits 0."""
    done = subprocess.run(
        [sys.executable, "-m", "broker.canary"], capture_output=True, text=True, timeout=120, check=False
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

    async def keyed_on_history(self, turn, task):
        past = await self._tasks.completed_tasks(namespace=turn.namespace, limit=1)
        if past:
            task = _broker.attrs.evolve(task, description=f"{task.description} {past[0].description}")
        return await original(self, turn, task)

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
