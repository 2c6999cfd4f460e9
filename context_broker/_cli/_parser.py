"""The argument parser: global options, then one subcommand per job.

The global options are accepted before or after the subcommand and listed in every
subcommand's help: each subcommand parser carries them too, with no default of its own, so
only a value the user typed there overrides the one given (or defaulted) before it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib import metadata

from context_broker import mcp
from context_broker.wiring import ENV_DB

from . import _broker_cmds, _completion, _explain_cmds, _ingest, _memorules, _select_cmds, _store_cmds
from ._logging import LEVELS
from ._options import flag_names, walk

# Subcommand groups, each a module exposing register(sub).
_GROUPS = (_ingest, _store_cmds, _select_cmds, _explain_cmds, _broker_cmds, _memorules, _completion, mcp)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line and no usage dump, and an unknown option
    is named even when the subcommand is missing too (argparse would only say that COMMAND is
    required): the subcommand is asked for once the arguments are known."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        subparsers = argparse._SubParsersAction  # noqa: SLF001 - argparse names no public type for it
        commands = next((a for a in self._actions if isinstance(a, subparsers)), None)
        if commands is None or not commands.required:
            return super().parse_known_args(args, namespace)
        commands.required = False
        try:
            parsed, extras = super().parse_known_args(args, namespace)
        finally:
            commands.required = True
        if getattr(parsed, commands.dest, None) is None and not extras:
            self.error(f"the following arguments are required: {commands.metavar or commands.dest}")
        return parsed, extras

    def error(self, message: str) -> None:  # type: ignore[override]
        # "argument --limit: must be ..." -> "--limit: must be ...", like the commands' own errors.
        self.exit(2, f"error: {message.removeprefix('argument ')}\n")


def version() -> str:
    """The installed distribution's version."""
    try:
        return metadata.version("context-broker")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The full parser: every subcommand, `mcp` included."""
    parser = _Parser(
        prog="context-broker",
        description="Decide which memories enter an agent's context, and prove it.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    _add_globals(parser, defaults=True)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for group in _GROUPS:
        group.register(sub)
    for child in walk(parser):
        _add_globals(
            child.add_argument_group("global options (also accepted before COMMAND)"), defaults=False
        )
        child.set_defaults(field_flags=flag_names(child))
    parser.set_defaults(root_parser=parser)  # `completion` describes the parser in use
    return parser


def _add_globals(p: argparse.ArgumentParser | argparse._ArgumentGroup, *, defaults: bool) -> None:
    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    p.add_argument(
        "--db",
        default=default(None),
        help=(
            "SQLite file, sqlite:/// URL or postgresql:// URL (extra [postgres]) "
            f"(default: ${ENV_DB}, else memory.db in the user data directory)"
        ),
    )
    p.add_argument("--tenant", default=default("default"), help="tenant id (default: default)")
    p.add_argument("--project", default=default("default"), help="project id (default: default)")
    p.add_argument(
        "--trace-file",
        default=default(None),
        help="append log and trace events (JSON lines) here, not stderr",
    )
    p.add_argument(
        "--trace-text",
        action="store_true",
        default=default(value=False),
        help="include memory and task text in traces",
    )
    p.add_argument(
        "--log-level",
        default=default("warning"),
        choices=LEVELS,
        help="stderr's log events at this level and above (default: warning; info adds each turn's "
        "trace and the memorule audit events)",
    )
    p.add_argument(
        "--durability",
        default=default("normal"),
        choices=("normal", "full"),
        help="normal (default): commits survive a crash of the process; full: fsync every commit, "
        "so they survive a power loss too",
    )
