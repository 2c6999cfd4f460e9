"""Shared fixtures: paths to the dev data in ../shared (tests skip cleanly without it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
