"""Shared fixtures: dev data paths in ../shared (tests skip cleanly without it), and the
validation of every `turn.completed` event the suite emits against the shipped schema."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import structlog

from broker._trace import TURN_COMPLETED, trace_schema

SHARED = Path(os.environ.get("CONTEXT_BROKER_SHARED", Path(__file__).resolve().parents[2] / "shared"))
LOCOMO = SHARED / "data" / "locomo" / "locomo-dev.json"
TRIVIAL = SHARED / "data" / "trivial_tasks.txt"


@pytest.fixture
def trivial_tasks() -> list[str]:
    """The tasks that must recall nothing (skips when ../shared is absent)."""
    if not TRIVIAL.exists():
        pytest.skip(f"dev data not found at {TRIVIAL}")
    return [t.strip() for t in TRIVIAL.read_text(encoding="utf-8").splitlines() if t.strip()]


@pytest.fixture
def locomo_path() -> Path:
    """The LoCoMo dev file (skips when ../shared is absent)."""
    if not LOCOMO.exists():
        pytest.skip(f"dev data not found at {LOCOMO}")
    return LOCOMO


@pytest.fixture(autouse=True)
def trace_events() -> Iterator[list[dict[str, Any]]]:
    """Capture structlog events; after the test, validate each `turn.completed` one."""
    with structlog.testing.capture_logs() as events:
        yield events
    validator = jsonschema.Draft202012Validator(trace_schema())
    for event in events:
        if event.get("event") == TURN_COMPLETED:
            validator.validate(event)
