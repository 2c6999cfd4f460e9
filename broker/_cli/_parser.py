"""The argument parser: global options, then one subcommand per job."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from . import _broker_cmds, _explain_cmds, _memorules, _select_cmds, _store_cmds
from ._app import ENV_DB
from ._logging import LEVELS

# Subcommand groups, each a module exposing register(sub).
_GROUPS = (_store_cmds, _select_cmds, _explain_cmds, _broker_cmds, _memorules)

Register = Callable[["argparse._SubParsersAction[Any]"], None]  # noqa: SLF001 - argparse names it privately
"""Adds subcommands; how the application package (context_broker) adds its own, e.g. `mcp`."""


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line and no usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message}\n")


def build_parser(extra: Sequence[Register] = ()) -> argparse.ArgumentParser:
    """The full parser, with the subcommands `extra` adds."""
    parser = _Parser(
        prog="context-broker",
        description="Decide which memories enter an agent's context, and prove it.",
    )
    parser.add_argument(
        "--db", help=f"SQLite file (default: ${ENV_DB}, else memory.db in the user data directory)"
    )
    parser.add_argument("--tenant", default="default", help="tenant id (default: default)")
    parser.add_argument("--project", default="default", help="project id (default: default)")
    parser.add_argument("--trace-file", help="append log and trace events (JSON lines) here, not stderr")
    parser.add_argument("--trace-text", action="store_true", help="include memory and task text in traces")
    parser.add_argument("--log-level", default="info", choices=LEVELS, help="default: info")
    parser.add_argument(
        "--durability",
        default="normal",
        choices=("normal", "full"),
        help="normal (default): commits survive a crash of the process; full: fsync every commit, "
        "so they survive a power loss too",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for group in _GROUPS:
        group.register(sub)
    for register in extra:
        register(sub)
    return parser
