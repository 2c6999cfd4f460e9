"""Every `turn.completed` event a broker test emits is validated against the shipped schema."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jsonschema
import pytest
import structlog

from broker._trace import TURN_COMPLETED, trace_schema

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(autouse=True)
def trace_events() -> Iterator[list[dict[str, Any]]]:
    """Capture structlog events; after the test, validate each `turn.completed` one."""
    with structlog.testing.capture_logs() as events:
        yield events
    validator = jsonschema.Draft202012Validator(trace_schema())
    for event in events:
        if event.get("event") == TURN_COMPLETED:
            validator.validate(event)
