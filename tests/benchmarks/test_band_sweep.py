"""The band sweep: each exponent is in force while its sets run, and the fitted one is back after."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import band_sweep
from sources.relevance import _calibration_constants as constants


def test_each_exponent_is_in_force_while_measured_and_the_fitted_ones_return(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`sweep` measures every set under each small-store exponent (long conversations' kept), then restores the constants."""
    fitted = constants.BAND_EXPONENTS
    seen: list[tuple[str, tuple[float, float]]] = []

    async def fake(name: str, mode: str) -> band_sweep.Point:
        seen.append((name, constants.BAND_EXPONENTS[mode]))
        return band_sweep.Point(hit=1.0, false_abstention=0.0, injected=1.0, gold_share=1.0)

    monkeypatch.setattr(band_sweep, "measure", fake)
    out = band_sweep.sweep("hybrid", (0.6, 1.5), sets=("agent-dev",))
    long = fitted["hybrid"][1]
    assert seen == [("agent-dev", (0.6, long)), ("agent-dev", (1.5, long))]
    assert list(out) == [0.6, 1.5]
    assert constants.BAND_EXPONENTS is fitted


def test_exponents_must_be_positive_numbers() -> None:
    """A list of positive numbers parses; a word, a non-positive or a non-finite value is an argparse error."""
    assert band_sweep._exponents("0.5,1") == (0.5, 1.0)
    for bad in ("a,1", "0,1", "-1", "nan", "inf"):
        with pytest.raises(argparse.ArgumentTypeError):
            band_sweep._exponents(bad)
