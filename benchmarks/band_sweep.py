"""What the small-store band trades: recall against what a turn injects, on our own sets.

The band's exponent for small stores (`BAND_EXPONENTS[mode][0]`, fitted by
benchmarks/fit_calibration.py) decides how far below a task's best memory the floor still
admits. This harness sets it to each given value in turn (in this process only, the package
untouched) and runs the personal and task-style sets through the real selector, as
`benchmarks.personal` and `benchmarks.agent_tasks` do (budgets 40 and 10). Printed per exponent
and set: the right fact selected (hit), false abstention, memories injected per answerable task
and the share of them the task needs (gold share). The fitted exponent is marked.

Issue 44's targets ask for a hit of 0.95 (personal) and 0.90 (task-style) with a gold share of
0.35 (task-style) at once; this shows what each exponent gives of each on the same ranking.

    python -m benchmarks.band_sweep [--mode dense|hybrid|lexical] [--exponents 0.6,1.0,1.5]
"""

from __future__ import annotations

import argparse
import math
from typing import Final

import anyio
import attrs

from sources.relevance import _calibration_constants as constants
from sources.relevance._relevance import MODES

from . import agent_tasks, personal

SETS: Final = ("personal-dev", "personal-test", "agent-dev", "agent-test")
DEFAULT_EXPONENTS: Final = (0.6, 1.0, 1.5)
"""Tried beside the fitted exponent, which is always run."""


@attrs.frozen(kw_only=True)
class Point:
    """One set at one exponent."""

    hit: float
    false_abstention: float
    injected: float
    gold_share: float

    def cell(self) -> str:
        return (
            f"hit {self.hit:.3f}  abstained {self.false_abstention:.3f}  "
            f"injected {self.injected:.1f}  gold share {self.gold_share:.3f}"
        )


async def measure(name: str, mode: str) -> Point:
    """One set through the selector at the exponent now in the constants."""
    kind, split = name.split("-")
    if kind == "personal":
        p = await personal.evaluate(personal.load(split), mode)
        return Point(
            hit=p.hit,
            false_abstention=p.false_abstention,
            injected=p.mean_injected,
            gold_share=1.0 - p.off_evidence if p.mean_injected else 0.0,
        )
    a = await agent_tasks.evaluate(agent_tasks.load(split), mode)
    return Point(
        hit=a.hit, false_abstention=a.false_abstention, injected=a.mean_injected, gold_share=a.gold_share
    )


def sweep(
    mode: str, exponents: tuple[float, ...], sets: tuple[str, ...] = SETS
) -> dict[float, dict[str, Point]]:
    """Each set's point at each small-store exponent; the fitted exponents are restored after."""
    fitted = constants.BAND_EXPONENTS
    out: dict[float, dict[str, Point]] = {}
    try:
        for exponent in exponents:
            constants.BAND_EXPONENTS = {**fitted, mode: (exponent, fitted[mode][1])}
            out[exponent] = {name: anyio.run(measure, name, mode, backend="trio") for name in sets}
    finally:
        constants.BAND_EXPONENTS = fitted
    return out


def _exponents(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError("exponents must be positive finite numbers")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=MODES, default="hybrid")
    parser.add_argument("--exponents", type=_exponents, default=DEFAULT_EXPONENTS, metavar="E,E,...")
    args = parser.parse_args(argv)
    fitted = constants.BAND_EXPONENTS[args.mode][0]
    exponents: tuple[float, ...] = tuple(sorted({fitted, *args.exponents}))
    for exponent, points in sweep(args.mode, exponents).items():
        mark = "  (fitted)" if exponent == fitted else ""
        print(f"{args.mode} small-store exponent {exponent:.3f}{mark}")
        for name, point in points.items():
            print(f"  {name:14s} {point.cell()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
