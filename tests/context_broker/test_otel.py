"""OpenTelemetry: a span per turn under the caller's span, a child span per source, no text."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

pytest.importorskip(
    "opentelemetry.sdk", reason="the [otel] extra is not installed (pip install -e '.[otel]')"
)

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from broker import RECALL_MIN_SCORE, ConfigError, Namespace, Turn, ValidationError, open_broker, open_selector
from broker.testing import FailingSource
from context_broker.otel import SOURCE_SPAN, TURN_SPAN, OpenTelemetryObserver
from sources import DEFAULT_SOURCES, MemoryStore, SqliteTaskRepository, default_sources

REAL_CLOCK_DEADLINE = 30.0
"""A turn's deadline where a real repository reads in a thread: one no slow machine misses."""

if TYPE_CHECKING:
    from collections.abc import Iterator

NS = Namespace(tenant_id="acme", project_id="web")
MEMORY = "The payment service deploy freeze runs every Friday after the payment incident."
TASK = "Plan the payment service deploy freeze for Friday"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def store(tmp_path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / "m.db", mode="lexical") as s:
        for text in ("Bought groceries for the week.", "The train to Lyon was delayed.", MEMORY):
            s.add_entry(text, namespace=NS)
        yield s


async def _turn(store, observer, *, task=TASK):
    tasks = SqliteTaskRepository.from_store(store)
    task_id = tasks.create_task(task, namespace=NS)
    sources = [*default_sources(store), FailingSource(name="flaky")]
    async with (
        open_selector(sources, deadline=REAL_CLOCK_DEADLINE, mode="lexical") as selector,
        open_broker(selector=selector, tasks=tasks, conversations=tasks, observer=observer) as broker,
    ):
        return await broker.assemble(Turn(task_id=task_id, namespace=NS, window=128_000, input_budget=8_000))


async def test_turn_span_is_a_child_of_the_callers_span(store, provider, exporter):
    """The host's current span is the turn's parent; each source is a child of the turn."""
    host = provider.get_tracer("host")
    with host.start_as_current_span("agent.step") as step:
        context = await _turn(store, OpenTelemetryObserver(tracer_provider=provider))
    spans = {s.name: s for s in exporter.get_finished_spans() if s.name != SOURCE_SPAN}
    sources = [s for s in exporter.get_finished_spans() if s.name == SOURCE_SPAN]
    turn = spans[TURN_SPAN]
    assert turn.parent.span_id == step.get_span_context().span_id
    assert turn.context.trace_id == step.get_span_context().trace_id
    assert [s.attributes["context_broker.source"] for s in sources] == [*DEFAULT_SOURCES, "flaky"]
    assert all(s.parent.span_id == turn.context.span_id for s in sources)
    assert turn.attributes["context_broker.memory_selected"] == context.trace["memory_selected"] == 1
    assert turn.attributes["context_broker.floor"] == RECALL_MIN_SCORE
    assert turn.attributes["context_broker.tenant"] == "acme"


async def test_source_spans_carry_status_latency_and_candidates(store, provider, exporter):
    """A failing source is an error span; the others say how many candidates they returned."""
    context = await _turn(store, OpenTelemetryObserver(tracer_provider=provider))
    by_name = {
        s.attributes["context_broker.source"]: s
        for s in exporter.get_finished_spans()
        if s.name == SOURCE_SPAN
    }
    traced = {s["name"]: s for s in context.trace["sources"]}
    for name, span in by_name.items():
        assert span.attributes["context_broker.source.status"] == traced[name]["status"]
        assert span.attributes["context_broker.source.candidates"] == traced[name]["candidates"]
        assert span.end_time - span.start_time == pytest.approx(traced[name]["latency_ms"] * 1e6, abs=1e3)
    assert by_name["flaky"].status.status_code is StatusCode.ERROR
    assert by_name["store"].status.status_code is StatusCode.UNSET
    assert by_name["store"].attributes["context_broker.source.candidates"] >= 1


async def test_no_text_unless_the_host_asks(store, provider, exporter):
    """Memory and task text never reach span attributes or events by default; include_text adds them."""
    await _turn(store, OpenTelemetryObserver(tracer_provider=provider))
    quiet = repr([(s.attributes, s.events) for s in exporter.get_finished_spans()])
    assert "deploy freeze" not in quiet
    exporter.clear()
    await _turn(store, OpenTelemetryObserver(tracer_provider=provider, include_text=True))
    turn = next(s for s in exporter.get_finished_spans() if s.name == TURN_SPAN)
    assert any(MEMORY in e.attributes["text"] for e in turn.events)


async def test_a_refused_turn_is_an_error_span(store, provider, exporter):
    """A turn that raises (unknown task) ends its span with the error recorded."""
    tasks = SqliteTaskRepository.from_store(store)
    async with (
        open_selector(default_sources(store), deadline=REAL_CLOCK_DEADLINE, mode="lexical") as selector,
        open_broker(
            selector=selector,
            tasks=tasks,
            conversations=tasks,
            observer=OpenTelemetryObserver(tracer_provider=provider),
        ) as broker,
    ):
        with pytest.raises(ValidationError):
            await broker.assemble(Turn(task_id="nope", namespace=NS, window=1000, input_budget=100))
    (turn,) = exporter.get_finished_spans()
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.events[0].name == "exception"


async def test_a_non_observer_is_a_config_error(store):
    """open_broker refuses an observer without a turn() method."""
    tasks = SqliteTaskRepository.from_store(store)
    with pytest.raises(ConfigError, match="observer"):
        async with open_broker(selector=None, tasks=tasks, conversations=tasks, observer=object()):  # type: ignore[arg-type]
            pass
