"""OpenTelemetry for the broker: one span per turn, a child span per source (extra `[otel]`).

    async with open_broker(..., observer=OpenTelemetryObserver()) as broker:
        with tracer.start_as_current_span("agent.step"):
            await broker.assemble(turn)      # -> context_broker.turn under agent.step

The turn span is opened in the caller's task, under the caller's current span; its children
(`context_broker.source`, one per source) carry the source's status, latency and candidate
count. Attributes hold ids, counts, the floor and reasons, never memory or task text unless
the host asks (`include_text=True`, which adds one span event per admitted block). The
`turn.completed` structlog event is emitted as before; this is a second, optional view.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from broker import RECALL_MIN_SCORE, SourceStatus

if TYPE_CHECKING:
    from collections.abc import Iterator

    from broker import Context, SelectionResult, Turn

TRACER_NAME = "context_broker"
TURN_SPAN = "context_broker.turn"
SOURCE_SPAN = "context_broker.source"
_PREFIX = "context_broker."
_FAILED = frozenset(
    {SourceStatus.FAILED, SourceStatus.TIMEOUT, SourceStatus.OVERLOADED, SourceStatus.OPEN_CIRCUIT}
)
# Trace fields copied onto the turn span as they are (all scalars).
_TURN_FIELDS = (
    "memory_candidates",
    "memory_selected",
    "memory_injected",
    "memory_cut_by_budget",
    "memory_abstained",
    "irrelevant_memory_rate",
    "recall_mode",
    "memory_budget",
    "input_budget",
    "memory_tokens",
    "total_tokens",
    "task_over_budget",
    "memory_unavailable_reason",
    "history_unavailable_reason",
)


class OpenTelemetryObserver:
    """A `broker.abc.TurnObserver` that traces each turn with OpenTelemetry.

    `tracer_provider` defaults to the global one (a no-op until the host installs an SDK).
    """

    def __init__(
        self, *, tracer_provider: trace.TracerProvider | None = None, include_text: bool = False
    ) -> None:
        self._tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)
        self._include_text = include_text

    @contextlib.contextmanager
    def turn(self, turn: Turn) -> Iterator[_Recorder]:
        """The turn's span, current while the turn runs; an exception marks it failed."""
        attributes: dict[str, Any] = {
            f"{_PREFIX}turn_id": turn.turn_id,
            f"{_PREFIX}task_id": turn.task_id,
            f"{_PREFIX}tenant": turn.namespace.tenant_id,
            f"{_PREFIX}project": turn.namespace.project_id,
            f"{_PREFIX}window": turn.window,
            f"{_PREFIX}floor": RECALL_MIN_SCORE,
        }
        with self._tracer.start_as_current_span(TURN_SPAN, attributes=attributes) as span:
            yield _Recorder(self._tracer, span, include_text=self._include_text)


class _Recorder:
    def __init__(self, tracer: trace.Tracer, span: trace.Span, *, include_text: bool) -> None:
        self._tracer = tracer
        self._span = span
        self._include_text = include_text

    def selection(self, result: SelectionResult, *, elapsed_ms: float) -> None:
        """One child span per source: the sources were asked together when the selection began."""
        parent = trace.set_span_in_context(self._span)
        began = time.time_ns() - int(elapsed_ms * 1e6)
        for outcome in result.sources:
            span = self._tracer.start_span(
                SOURCE_SPAN,
                context=parent,
                start_time=began,
                attributes={
                    f"{_PREFIX}source": outcome.name,
                    f"{_PREFIX}source.status": str(outcome.status),
                    f"{_PREFIX}source.latency_ms": round(outcome.latency_ms, 3),
                    f"{_PREFIX}source.candidates": outcome.candidates,
                },
            )
            if outcome.status in _FAILED:
                span.set_status(Status(StatusCode.ERROR, outcome.error or str(outcome.status)))
            span.end(end_time=began + int(outcome.latency_ms * 1e6))

    def completed(self, context: Context) -> None:
        """The turn's counts, budgets and decisions as attributes of its span."""
        event = context.trace
        attributes: dict[str, Any] = {
            f"{_PREFIX}{k}": event[k] for k in _TURN_FIELDS if event.get(k) is not None
        }
        attributes[f"{_PREFIX}blocks"] = len(event.get("blocks", ()))
        attributes[f"{_PREFIX}dropped"] = len(event.get("dropped", ()))
        attributes[f"{_PREFIX}total_ms"] = event["timings"]["total_ms"]
        self._span.set_attributes(attributes)
        if self._include_text:
            for block in context.blocks:
                self._span.add_event(
                    "context_broker.block",
                    {
                        "name": block.name,
                        "kind": block.kind,
                        "entry_id": block.entry_id or "",
                        "text": block.text,
                    },
                )
