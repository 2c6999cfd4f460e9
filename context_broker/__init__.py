"""context_broker: the application beside the two libraries — the MCP server, the
OpenTelemetry and LangGraph adapters, and the `context-broker` command's entry point.

It is the composition root: the one package that imports both `broker` (decisions) and
`sources` (storage); neither of them ever imports it.
"""

from __future__ import annotations

from broker.log import add_null_handler

add_null_handler(__name__)  # silent unless the host configures logging (see broker.log)
