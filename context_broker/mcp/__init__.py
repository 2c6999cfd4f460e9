"""The MCP server: the broker's tools for any MCP client (`context-broker mcp`).

Over stdio every call runs in the server's `--tenant` / `--project`; over streamable HTTP in
the namespace of the caller's bearer token (see `_tokens`). Needs the `[mcp]` extra.
"""

from __future__ import annotations

from ._command import register as register
from ._tokens import ENV_TOKENS as ENV_TOKENS
from ._tokens import TokenMap as TokenMap
from ._tokens import load_tokens as load_tokens
from ._tokens import parse_tokens as parse_tokens
from ._tools import TOOLS as TOOLS

__all__ = ["ENV_TOKENS", "TOOLS", "TokenMap", "load_tokens", "parse_tokens", "register"]
