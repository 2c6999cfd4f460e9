"""context_broker: the application beside the two libraries — the `context-broker` command
(`_cli/`), the canary, the default wiring and the demo's sample data (`wiring`), the MCP
server, and the OpenTelemetry and LangGraph adapters.

It is the composition root: the one package that imports both `broker` (decisions) and
`sources` (storage); neither of them ever imports it (import-linter's layers contract).
"""

from __future__ import annotations

from broker.log import add_null_handler

add_null_handler(__name__)  # silent unless the host configures logging (see broker.log)
