"""`context-broker mcp`: serve the tools over stdio (the default) or streamable HTTP.

One of the CLI's subcommand groups (`context_broker._cli`); the `mcp` SDK is imported only when the
command runs, so the CLI works without the `[mcp]` extra.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio

from broker import RECALL_MODES, ConfigError
from context_broker._services import open_services

from ._tokens import ENV_TOKENS, load_tokens

if TYPE_CHECKING:
    import argparse

    from context_broker._cli._app import App

DEFAULT_PORT = 8765


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `mcp`."""
    p = sub.add_parser("mcp", help="serve the broker's tools to MCP clients (stdio or streamable HTTP)")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"HTTP: port (default {DEFAULT_PORT}; 0 = any)"
    )
    p.add_argument(
        "--tokens", help=f"HTTP: JSON list of {{token, tenant, project?}} (default: ${ENV_TOKENS})"
    )
    p.add_argument("--deadline-ms", type=float, default=250.0, help="memory selection deadline (default 250)")
    p.add_argument("--mode", choices=RECALL_MODES, help="recall mode (default: hybrid)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, app: App) -> int:
    """Open the store and serve until the client (stdio) or a signal (HTTP) ends it."""
    try:
        from . import _server  # noqa: PLC0415 - the optional extra
    except ImportError as exc:
        raise ConfigError(f"mcp: needs the [mcp] extra: pip install 'context-broker[mcp]' ({exc})") from exc
    if not math.isfinite(args.deadline_ms) or args.deadline_ms <= 0:
        raise ConfigError("--deadline-ms: must be > 0")
    if not 0 <= args.port <= 65535:
        raise ConfigError("--port: must be in 0..65535")
    namespace = app.namespace
    app.check_store_directory()  # the server writes (its remember tool): it may create the store
    tokens = load_tokens(args.tokens, project=args.project) if args.transport == "http" else None

    async def serve() -> None:
        async with open_services(
            app.db_path,
            mode=args.mode,
            deadline=args.deadline_ms / 1000.0,
            include_text=bool(args.trace_text),
        ) as services:
            if tokens is None:
                await _server.serve_stdio(services, namespace)
            else:
                await _server.serve_http(services, tokens, host=args.host, port=args.port)

    anyio.run(serve, backend="asyncio")
    return 0
