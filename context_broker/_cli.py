"""The `context-broker` console script: the broker's CLI plus the application's subcommands.

The CLI itself still lives in `broker._cli` (moving it here is issue 14's work); this entry
point hands it the subcommands that need `context_broker`, so `broker` never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker._cli import main as broker_main

from .mcp import _command as mcp_command

if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with the `mcp` subcommand; returns the exit status."""
    return broker_main(argv, extra=(mcp_command.register,))
