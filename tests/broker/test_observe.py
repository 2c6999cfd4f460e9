"""An observer that raises never fails a turn: the broker logs it and goes on."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import attrs
import pytest
import structlog

from broker import Namespace, Turn, open_broker, open_selector
from broker._observe import OBSERVER_FAILED
from broker.abc import ConversationTurn, TaskRecord
from broker.testing import FakeSource, make_candidate

if TYPE_CHECKING:
    from collections.abc import Iterator

NS = Namespace(tenant_id="acme")
REAL_CLOCK_DEADLINE = 30.0
"""The turn's deadline on the real clock: these tests are of the observer, not the deadline."""
T0 = "2026-01-01T00:00:00+00:00"


@attrs.define
class Tasks:
    """One active task, no conversations."""

    async def get_task(self, task_id: str, *, namespace: Namespace) -> TaskRecord | None:  # noqa: ARG002, D102
        return TaskRecord(
            task_id=task_id, description="Plan the rollout", status="active", created_at=T0, updated_at=T0
        )

    async def completed_tasks(self, *, namespace: Namespace, limit: int) -> list[TaskRecord]:  # noqa: ARG002, D102
        return []

    async def turns(self, task_id: str, *, namespace: Namespace) -> list[ConversationTurn]:  # noqa: ARG002, D102
        return []


@attrs.define
class Recorder:
    """Raises at `fails` ('selection' or 'completed'), records the rest."""

    fails: str
    seen: list[str] = attrs.field(factory=list)

    def selection(self, result: object, *, elapsed_ms: float) -> None:  # noqa: ARG002, D102
        self._step("selection")

    def completed(self, context: object) -> None:  # noqa: ARG002, D102
        self._step("completed")

    def _step(self, step: str) -> None:
        if step == self.fails:
            raise RuntimeError(f"observer broke at {step}")
        self.seen.append(step)


@attrs.define
class Observer:
    """Raises where told: on `turn()`, entering, any recorder call, or leaving."""

    fails: str
    recorder: Recorder = attrs.field(init=False)
    exited: list[type[BaseException] | None] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        self.recorder = Recorder(self.fails)

    def turn(self, turn: Turn) -> contextlib.AbstractContextManager[Recorder]:  # noqa: ARG002, D102
        if self.fails == "turn":
            raise RuntimeError("observer broke at turn")
        return self._around()

    @contextlib.contextmanager
    def _around(self) -> Iterator[Recorder]:
        if self.fails == "enter":
            raise RuntimeError("observer broke at enter")
        try:
            yield self.recorder
        finally:
            self.exited.append(None)
            if self.fails == "exit":
                raise RuntimeError("observer broke at exit")


async def assemble(observer: Observer):
    tasks = Tasks()
    async with (
        open_selector(
            [FakeSource("fake", candidates=[make_candidate("m1", 0.9)])], deadline=REAL_CLOCK_DEADLINE
        ) as selector,
        open_broker(selector=selector, tasks=tasks, conversations=tasks, observer=observer) as broker,
    ):
        return await broker.assemble(Turn(task_id="t", namespace=NS, window=128_000, input_budget=8000))


@pytest.mark.parametrize("step", ["turn", "enter", "selection", "completed", "exit"])
async def test_an_observer_that_raises_is_logged_and_the_turn_completes(step):
    """Whichever call of the observer raises, the turn returns its context and logs `observer.failed`."""
    observer = Observer(step)
    with structlog.testing.capture_logs() as logs:
        context = await assemble(observer)
    assert [b.entry_id for b in context.blocks] == ["m1", "t"]
    failed = [e for e in logs if e["event"] == OBSERVER_FAILED]
    assert [e["step"] for e in failed] == [step]
    assert failed[0]["log_level"] == "warning"
    assert isinstance(failed[0]["exc_info"], RuntimeError)


async def test_a_failing_recorder_call_does_not_stop_the_next():
    """A selection report that raises still lets the observer see the turn complete and end."""
    observer = Observer("selection")
    await assemble(observer)
    assert observer.recorder.seen == ["completed"]
    assert observer.exited == [None]
