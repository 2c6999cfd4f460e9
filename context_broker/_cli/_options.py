"""Options shared by several commands, each defined once: the turn deadline and positive counts
(every out-of-range value reported at once), and how a library field error is named after the
flag or argument the user typed (`memorule_kind` -> `--memorule-kind`, `description` -> `TASK`)."""

from __future__ import annotations

import argparse
import math
import re
from typing import TYPE_CHECKING

from broker import MAX_BUDGET

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

    from broker import FieldError

DEFAULT_DEADLINE_MS = 100.0
"""The memory-selection deadline of `demo`, `select` and `explain`, in milliseconds: one default for both,
the library's own (`open_selector`). A one-shot CLI turn measured 25-58 ms on a loaded 2-core
machine, cold start included."""

# Library field names that are not the dest of the option carrying them.
_FIELD_DESTS = {"description": "task", "task_id": "task", "top_k": "limit"}
_FIELD_BASE = re.compile(r"[A-Za-z_]+")

SELECT_BUDGET = 10
"""The memories `select` and `explain` take by default (a count, not tokens)."""
NO_SOURCE_ANSWERED = (
    "no memories: no source answered (each timed out or failed, below); a longer --deadline-ms may help"
)
_ANSWERED = frozenset({"ok", "empty"})


def unanswered(sources: Iterable[tuple[str, str]]) -> str | None:
    """When some of a turn's sources (name, status) did not answer but others did: a line naming
    them, since what they hold is missing from the turn (None: every source answered, or none)."""
    seen = list(sources)
    missing = [f"{name}={status}" for name, status in seen if status not in _ANSWERED]
    if not missing or len(missing) == len(seen):
        return None
    return (
        f"{len(missing)} of {len(seen)} sources did not answer ({', '.join(missing)}): their memories "
        "are missing here; a longer --deadline-ms may help"
    )


def none_answered(statuses: Iterable[str]) -> bool:
    """True when a turn had sources and none answered (each timed out, failed or was shed):
    its zero memories are no abstention."""
    seen = list(statuses)
    return bool(seen) and not _ANSWERED.intersection(seen)


class _Checked(argparse.Action):
    """Store the value; if it is out of range, note an error for `option_errors` instead of
    stopping, so one invocation reports every bad option at once."""

    requirement: str = ""

    def ok(self, value: float) -> bool:
        raise NotImplementedError

    def __call__(
        self,
        parser: argparse.ArgumentParser,  # noqa: ARG002 - argparse's signature
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        assert isinstance(values, int | float)  # noqa: S101 - the option's type converted it
        if not self.ok(values):
            given = str(values) if isinstance(values, int) else f"{values:g}"  # an int as typed
            errors = [
                *getattr(namespace, "option_errors", ()),
                f"error: {option_string}: must be {self.requirement}, got {given}",
            ]
            namespace.option_errors = errors
        setattr(namespace, self.dest, values)


class PositiveMs(_Checked):
    """An action for milliseconds: a finite number > 0 (use with type=float)."""

    requirement = "a finite number of milliseconds > 0"

    def ok(self, value: float) -> bool:
        return math.isfinite(value) and value > 0


class PositiveInt(_Checked):
    """An action for a count: an integer >= 1 (use with type=int)."""

    requirement = "a positive integer"

    def ok(self, value: float) -> bool:
        return value >= 1


def int_in(low: int, high: int) -> type[_Checked]:
    """An action for an integer in [low, high] (use with type=int)."""

    class _Within(_Checked):
        requirement = f"an integer in {low}..{high}"

        def ok(self, value: float) -> bool:
            return low <= value <= high

    return _Within


def option_errors(args: argparse.Namespace) -> list[str]:
    """Every out-of-range option of this invocation, one line each."""
    return list(getattr(args, "option_errors", ()))


def add_deadline_argument(p: argparse.ArgumentParser) -> None:
    """--deadline-ms, with the one default."""
    p.add_argument(
        "--deadline-ms",
        type=float,
        action=PositiveMs,
        default=DEFAULT_DEADLINE_MS,
        metavar="MS",
        help=f"memory-selection deadline in milliseconds (default {DEFAULT_DEADLINE_MS:g})",
    )


def flag_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option's dest -> what the user typed for it: `--memorule-kind`, or `TASK` for a positional."""
    names: dict[str, str] = {}
    for action in parser._actions:  # noqa: SLF001 - argparse has no public list of a parser's actions
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):  # noqa: SLF001
            continue
        if action.option_strings:
            longs = [s for s in action.option_strings if s.startswith("--")]
            names[action.dest] = (longs or action.option_strings)[0]
        else:
            metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
            names[action.dest] = metavar
    return names


def field_label(field: str, flags: Mapping[str, str]) -> str:
    """Name a library field (`memorule_kind`, `applies_to[1]`) after the flag that carried it."""
    match = _FIELD_BASE.match(field)
    if match is None:
        return field
    base = match.group(0)
    dest = _FIELD_DESTS.get(base, base)
    return flags[dest] + field[match.end() :] if dest in flags else field


def field_lines(errors: tuple[FieldError, ...] | list[FieldError], flags: Mapping[str, str]) -> list[str]:
    """One `error: <flag>: <message> (<code>)` line per field error (a repeated one once)."""
    lines = [f"error: {field_label(e.field, flags)}: {e.message} ({e.code})" for e in errors]
    return list(dict.fromkeys(lines))


def walk(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every subcommand parser under `parser`, depth first (aliases once)."""
    seen: set[int] = set()
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for child in action.choices.values():
                if id(child) not in seen:
                    seen.add(id(child))
                    yield child
                    yield from walk(child)


BudgetCount = int_in(1, MAX_BUDGET)
"""The `--budget` of `select` and `explain`: a count of memories in 1..MAX_BUDGET, as a batch
line's `budget` and the selector take it."""
