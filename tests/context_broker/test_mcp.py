"""The MCP server, driven by the SDK's own client session over stdio and streamable HTTP.

Each test starts `context-broker mcp` as a real subprocess on a real SQLite file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from importlib import metadata
from typing import TYPE_CHECKING, Any

import pytest

mcp = pytest.importorskip("mcp", reason="the [mcp] extra is not installed (pip install -e '.[mcp]')")

import httpx2  # noqa: E402 - after the skip
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

# The SDK's HTTP client (httpx2) leaves its SSE and body generators to the garbage collector
# under trio; with warnings as errors that would fail the test for a leak that is not ours.
pytestmark = pytest.mark.filterwarnings("ignore:Async generator 'http:ResourceWarning")

ACME_TOKEN = "acme-" + "a" * 32
GLOBEX_TOKEN = "globex-" + "g" * 32
SERVER = [sys.executable, "-m", "context_broker"]
UNRACED = ("--deadline-ms", "30000")
"""The server's selection deadline: one a loaded machine does not race (these tests are of what it
serves, not of its deadline; the default, 250 ms, can lose a source while other processes hold
the cores)."""


def _env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in {"CONTEXT_BROKER_MCP_TOKENS", "CONTEXT_BROKER_PERSONA"}
    }


@asynccontextmanager
async def stdio_session(db: Path, *, tenant: str = "acme") -> AsyncIterator[ClientSession]:
    args = ["-m", "context_broker", "--db", str(db), "--tenant", tenant, "--project", "web", "mcp", *UNRACED]
    params = StdioServerParameters(command=sys.executable, args=args, env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """(is_error, structured content or the text lines of an error)."""
    result = await session.call_tool(tool, arguments)
    if result.is_error:
        return True, result.content[0].text.splitlines()
    assert json.loads(result.content[0].text) == result.structured_content
    return False, result.structured_content


async def test_the_server_reports_its_name_and_version(tmp_path):
    """`initialize` answers with the server's name and the installed distribution's version."""
    args = ["-m", "context_broker", "--db", str(tmp_path / "m.db"), "mcp", *UNRACED]
    params = StdioServerParameters(command=sys.executable, args=args, env=_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        result = await session.initialize()
    assert result.server_info.name == "context-broker"
    assert result.server_info.version == metadata.version("context-broker")


async def test_stdio_lists_every_tool(tmp_path):
    """A client sees every tool the issue names, each with a strict input schema."""
    async with stdio_session(tmp_path / "m.db") as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {
        "remember",
        "recall",
        "select",
        "assemble",
        "task_create",
        "task_status",
        "task_append_turn",
        "memorule_update",
        "memorule_delete",
        "memorule_history",
        "audit",
    }
    assert tools["recall"].input_schema["required"] == ["query"]
    assert tools["recall"].input_schema["additionalProperties"] is False
    assert tools["recall"].annotations.read_only_hint is True


async def test_stdio_remember_recall_assemble_in_the_servers_namespace(tmp_path):
    """A note written over MCP is recalled and assembled into the turn, in --tenant/--project."""
    db = tmp_path / "m.db"
    async with stdio_session(db) as session:
        _, written = await call(
            session, "remember", text="Deploys freeze every Friday after the payment incident."
        )
        _, recalled = await call(session, "recall", query="can we deploy the payment fix on Friday")
        _, task = await call(session, "task_create", description="Can we deploy the payment fix on Friday?")
        _, turn = await call(session, "assemble", task_id=task["task_id"], message="ship it?")
        _, nothing = await call(session, "select", task="what time is it")
    assert [m["id"] for m in recalled["memories"]] == [written["id"]]
    assert "Deploys freeze every Friday" in turn["text"]
    assert turn["text"].index("Deploys freeze") < turn["text"].index("Can we deploy the payment fix")
    assert [b["kind"] for b in turn["blocks"]] == ["memory", "task"]
    assert turn["trace"]["memory_selected"] == 1
    assert turn["trace"]["namespace"] == {"tenant": "acme", "project": "web"}
    assert "text" not in turn["trace"]["blocks"][0]  # no memory text in the trace unless asked
    assert nothing["abstained"] is True
    async with stdio_session(db, tenant="globex") as other:
        _, foreign = await call(other, "recall", query="can we deploy the payment fix on Friday")
    assert foreign == {"memories": []}


async def test_stdio_tasks_and_memorules(tmp_path):
    """Task status and turns, memorule update / history / delete and the audit trail, over MCP."""
    async with stdio_session(tmp_path / "m.db") as session:
        _, task = await call(session, "task_create", description="Rotate the TLS certificates")
        _, appended = await call(session, "task_append_turn", task_id=task["task_id"], role="user", text="go")
        _, done = await call(session, "task_status", task_id=task["task_id"], status="completed")
        _, rule = await call(
            session,
            "remember",
            kind="memorule",
            memorule_kind="convention",
            subject="Release notes",
            body="Release notes list every migration first.",
            applies_to={"scope": "project"},
            persona="donna",
        )
        _, updated = await call(
            session, "memorule_update", id=rule["id"], confidence="asserted", persona="texi"
        )
        _, history = await call(session, "memorule_history", id=rule["id"])
        _, deleted = await call(session, "memorule_delete", id=rule["id"], persona="donna", session_id="s-9")
        _, audit = await call(session, "audit")
        missing = await call(session, "memorule_history", id=rule["id"])
    assert (appended["turns"], done["status"]) == (1, "completed")
    assert updated["confidence"] == "asserted"
    assert [s["confidence"] for s in history["states"]] == ["inferred", "asserted"]
    assert deleted == {"id": rule["id"], "deleted": True}
    assert [e["action"] for e in audit["events"]] == ["create", "update", "delete"]
    writers = [(e["written_by_persona"], e["written_by_session_id"]) for e in audit["events"]]
    assert [p for p, _ in writers] == ["donna", "texi", "donna"]
    assert writers[0][1] == writers[1][1]  # the server's own session id when none is given
    assert writers[0][1]
    assert writers[2][1] == "s-9"
    assert missing == (True, [f"error: id: no memorule {rule['id']!r} in acme/web (not_found)"])


async def test_stdio_recall_takes_source_type_and_the_session_context(tmp_path):
    """`recall` mirrors semantic_recall: source_type memorule, ranked and filtered by persona."""
    async with stdio_session(tmp_path / "m.db") as session:
        for persona in ("donna", "texi"):
            await call(
                session,
                "remember",
                kind="memorule",
                id=f"rule-{persona}",
                memorule_kind="behavioral_rule",
                subject="Friday deploys",
                body=f"{persona.title()} never deploys to production on a Friday afternoon.",
                applies_to={"persona": persona},
                persona=persona,
            )
        await call(session, "remember", text="Friday afternoon production deploys need the on-call lead.")
        query = "Can we deploy to production on Friday afternoon?"
        _, rules = await call(session, "recall", query=query, source_type="memorule", persona="texi")
        _, memories = await call(session, "recall", query=query)
        bad = await call(session, "recall", query=query, limit=0)
    assert [(m["id"], m["source_type"], m["applies_to"]) for m in rules["memories"]] == [
        ("rule-texi", "memorule", {"persona": "texi"})
    ]
    assert sorted(m["source_type"] for m in memories["memories"]) == ["memorule", "memorule", "memory"]
    assert bad == (True, ["error: limit: must be an integer in 1..1000 (out_of_range)"])


async def test_stdio_bad_input_gets_the_clis_field_errors(tmp_path):
    """Every problem is reported at once, one `error: field: message (code)` line each."""
    async with stdio_session(tmp_path / "m.db") as session:
        typed = await call(session, "recall", query=7, limit="ten", tenant="globex")
        memorule = await call(session, "remember", kind="memorule", memorule_kind="whim")
        budget = await call(session, "select", task="deploy", budget=0)
        neither = await call(session, "assemble")
        deadline = await call(session, "select", task="deploy", deadline_ms=0)
        turn = await call(session, "assemble", task=" ", window=-5, input_budget=-5, deadline_ms=-1)
    assert typed == (
        True,
        [
            "error: tenant: unknown field (unknown)",
            "error: query: must be a string (type)",
            "error: limit: must be an integer (type)",
        ],
    )
    assert memorule == (
        True,
        [  # exactly what `context-broker remember` prints
            (
                "error: memorule_kind: must be one of behavioral_rule, feedback, preference, correction, convention;"
                " got 'whim' (invalid_choice)"
            ),
            "error: subject: is required for kind 'memorule' (required)",
            "error: body: is required for kind 'memorule' (required)",
            "error: applies_to: is required for kind 'memorule' (required)",
            "error: persona: a memorule write names its writer: give persona or set $CONTEXT_BROKER_PERSONA (required)",
        ],
    )
    assert budget == (True, ["error: budget: must be an integer in 1..1000 (out_of_range)"])
    assert neither == (True, ["error: task_id: give exactly one of task_id or task (required)"])
    # the tool's own field names and units (not the library's `deadline` in seconds or the
    # task's `description`), and every problem of a turn at once
    assert deadline == (True, ["error: deadline_ms: must be a finite number of milliseconds > 0 (invalid)"])
    assert turn == (
        True,
        [
            "error: deadline_ms: must be a finite number of milliseconds > 0 (invalid)",
            "error: window: must be an integer >= 1 (out_of_range)",
            "error: input_budget: must be an integer >= 0 (out_of_range)",
            "error: task: must not be empty (empty)",
        ],
    )


# -- streamable HTTP ------------------------------------------------------------------------


@pytest.fixture
def http_server(tmp_path):
    """`context-broker mcp --transport http` on a free port, two tenants' tokens in a file."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps([{"token": ACME_TOKEN, "tenant": "acme"}, {"token": GLOBEX_TOKEN, "tenant": "globex"}])
    )
    cmd = [
        *SERVER,
        "--db",
        str(tmp_path / "m.db"),
        "--project",
        "web",
        "mcp",
        *UNRACED,
        "--transport",
        "http",
        "--port",
        "0",
        "--tokens",
        str(tokens),
    ]
    log = tmp_path / "server.log"
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stderr=err, env=_env())  # a file: a full pipe would block the server
    try:
        deadline = time.monotonic() + 60
        while "mcp: serving " not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [x for x in log.read_text().splitlines() if x.startswith("mcp: serving ")]
        if not lines:
            pytest.fail(f"the server did not start: {log.read_text()[-2000:]}")
        yield lines[0].removeprefix("mcp: serving ").strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "Traceback" not in log.read_text()


@asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_http_token_decides_the_tenant(http_server):
    """Each token reads and writes its own tenant; naming another tenant is refused."""
    async with http_session(http_server, ACME_TOKEN) as acme:
        _, written = await call(acme, "remember", text="The acme deploy key rotates every quarter.")
        _, task = await call(acme, "task_create", description="When does the acme deploy key rotate?")
        _, mine = await call(acme, "recall", query="when does the deploy key rotate")
        smuggled = await call(acme, "recall", query="deploy key rotate", tenant="globex")
    async with http_session(http_server, GLOBEX_TOKEN) as globex:
        _, theirs = await call(globex, "recall", query="when does the deploy key rotate")
        stolen = await call(globex, "assemble", task_id=task["task_id"])
        _, audit = await call(globex, "audit")
    assert [m["id"] for m in mine["memories"]] == [written["id"]]
    assert smuggled == (True, ["error: tenant: unknown field (unknown)"])
    assert theirs == {"memories": []}
    assert stolen[0] is True
    assert stolen[1][0].startswith("error: task_id: no task")
    assert audit == {"events": []}


@pytest.mark.parametrize("token", [None, "wrong-" + "x" * 32, ACME_TOKEN[:-1]])
async def test_http_refuses_a_missing_or_wrong_token(http_server, token):
    """No token or a wrong one: 401 before any tool runs."""
    async with httpx2.AsyncClient() as client:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        response = await client.post(http_server, json=body, headers=headers)
    assert response.status_code == 401
    with pytest.raises(Exception):  # noqa: B017 - the SDK client surfaces the 401 its own way
        async with http_session(http_server, token) as session:
            await session.list_tools()
