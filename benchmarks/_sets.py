"""Running our own relevance sets (personal, task-style) set by set and mode by mode."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from sources.relevance._relevance import MODES

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

Figures = dict[str, dict[str, dict[str, float]]]


def run_sets(
    load: Callable[[str], dict[str, Any]],
    evaluate: Callable[[dict[str, Any], str], Awaitable[Any]],
    sets: tuple[str, ...],
    modes: tuple[str, ...] = MODES,
) -> Figures:
    """Figures of every set in every mode, as plain dicts (set -> mode -> figure -> value)."""
    out: Figures = {}
    for name in sets:
        data = load(name)
        for mode in modes:
            figures = anyio.run(evaluate, data, mode, backend="trio")
            out.setdefault(name, {})[mode] = attrs.asdict(figures)
    return out


def chosen(
    doc: str | None, sets: tuple[str, ...], argv: list[str] | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The sets and modes `--set` and `--mode` name (`all`: every one)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=(*sets, "all"), default="all")
    parser.add_argument("--mode", choices=(*MODES, "all"), default="all")
    args = parser.parse_args(argv)
    return (sets if args.set == "all" else (args.set,)), (MODES if args.mode == "all" else (args.mode,))
