"""The MCP server on the official SDK's low-level `Server`: tools from one table, served over
stdio (the server's own namespace) or streamable HTTP (each bearer token's namespace).

The low-level server is used rather than `MCPServer` so that the tool inputs are checked by
`_fields` and the library (the CLI's field errors), not by pydantic models of signatures.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from pydantic import AnyHttpUrl

from broker import BrokerError, ConfigError, ValidationError
from context_broker._cli._parser import version

from ._fields import input_schema, parse
from ._tools import TOOLS, Tool

if TYPE_CHECKING:
    from collections.abc import Callable

    from broker import Namespace
    from context_broker._services import Services

    from ._tokens import TokenMap

SERVER_NAME = "context-broker"


def build_server(
    services: Services, namespace_of: Callable[[ServerRequestContext[Any]], Namespace | None]
) -> Server[Any]:
    """A server whose every tool call runs in the namespace `namespace_of` gives its request."""

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_describe(t) for t in TOOLS.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        namespace = namespace_of(ctx)
        if namespace is None:  # the transport let an unauthenticated request through: refuse
            return _error(["error: authorization: no valid bearer token (unauthorized)"])
        tool = TOOLS.get(params.name)
        if tool is None:
            return _error([f"error: name: unknown tool {params.name!r} (unknown)"])
        try:
            result = await tool.handler(services, namespace, parse(tool.fields, params.arguments))
        except ValidationError as exc:
            return _error([f"error: {e.field}: {e.message} ({e.code})" for e in exc.errors], exc)
        except BrokerError as exc:
            return _error([f"error: {exc}"])
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=result
        )

    return Server(SERVER_NAME, version=version(), on_list_tools=list_tools, on_call_tool=call_tool)


def _describe(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=input_schema(tool.fields),
        annotations=types.ToolAnnotations(read_only_hint=tool.read_only),
    )


def _error(lines: list[str], exc: ValidationError | None = None) -> types.CallToolResult:
    structured = None
    if exc is not None:
        structured = {
            "errors": [{"field": e.field, "code": e.code, "message": e.message} for e in exc.errors]
        }
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="\n".join(lines))],
        structured_content=structured,
        is_error=True,
    )


async def serve_stdio(services: Services, namespace: Namespace) -> None:
    """Serve over stdin/stdout until the client closes; every call runs in `namespace`."""
    server = build_server(services, lambda _ctx: namespace)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class _Verifier:
    """The SDK's TokenVerifier over our token map: the tenant travels as the client id."""

    def __init__(self, tokens: TokenMap) -> None:
        self._tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        grant = self._tokens.lookup(token)
        if grant is None:
            return None
        return AccessToken(token=token, client_id=grant.namespace.tenant_id, subject=grant.label, scopes=[])


def _http_namespace(tokens: TokenMap) -> Callable[[ServerRequestContext[Any]], Namespace | None]:
    def namespace_of(ctx: ServerRequestContext[Any]) -> Namespace | None:
        user = getattr(ctx.request, "scope", {}).get("user")
        if not isinstance(user, AuthenticatedUser):
            return None
        grant = tokens.lookup(user.access_token.token)
        return None if grant is None else grant.namespace

    return namespace_of


async def serve_http(services: Services, tokens: TokenMap, *, host: str, port: int) -> None:
    """Serve streamable HTTP at http://host:port/mcp; a request without a known token gets 401."""
    import uvicorn  # noqa: PLC0415 - only the HTTP transport needs it

    server = build_server(services, _http_namespace(tokens))
    # The SDK's bearer middleware wants AuthSettings; with no resource_server_url and no
    # authorization-server provider, the issuer is only named, never served or contacted.
    auth = AuthSettings(issuer_url=AnyHttpUrl(f"http://{host}:{port or 1}"), resource_server_url=None)
    app = server.streamable_http_app(host=host, auth=auth, token_verifier=_Verifier(tokens))
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="on")
    http = uvicorn.Server(config)
    stopped = anyio.Event()

    async def run() -> None:
        try:
            await http.serve()
        finally:
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        while not (http.started or stopped.is_set()):  # noqa: ASYNC110 - uvicorn has a flag, no event
            await anyio.sleep(0.02)
        if http.started:
            bound = http.servers[0].sockets[0].getsockname()[1]
            sys.stderr.write(f"mcp: serving http://{host}:{bound}/mcp\n")
            sys.stderr.flush()
    if not http.started:
        raise ConfigError(f"cannot serve on {host}:{port}")
