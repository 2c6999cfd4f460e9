"""The OpenAI Agents SDK with the broker's context as the agent's instructions, per turn.

The instructions are a function: each run assembles the task's context and hands its text to
the model. `EchoModel` stands in for the LLM (offline, deterministic), and tracing to the
OpenAI platform is off. Run: python docs/examples/openai_agents.py memory.db
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from typing import Any

import anyio
from agents import (
    Agent,
    Model,
    ModelResponse,
    RunConfig,
    RunContextWrapper,
    Runner,
    Usage,
    set_tracing_disabled,
)
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from broker import ConfigError, ContextBroker, Namespace, Turn, open_broker, open_selector
from sources import MemoryStore, SqliteTaskRepository, StoreError, default_sources, remember

NS = Namespace(tenant_id="acme", project_id="web")


@dataclass
class Session:
    """What the instructions function needs: the broker and the task this conversation is about."""

    broker: ContextBroker
    task_id: str


async def broker_instructions(wrapper: RunContextWrapper[Session], _agent: Agent[Session]) -> str:
    """One `assemble` per turn: memories that clear the floor, history, the active task last."""
    session = wrapper.context
    ctx = await session.broker.assemble(
        Turn(task_id=session.task_id, namespace=NS, window=128_000, input_budget=8_000)
    )
    return "You are the release assistant.\n\n" + ctx.text


class EchoModel(Model):
    """A fake model: says which remembered fact its instructions held (no network)."""

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        seen = "freeze" if system_instructions and "freeze every Friday" in system_instructions else "nothing"
        text = f"instructions held: {seen}"
        message = ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main(path: str) -> None:
    set_tracing_disabled(True)  # no traces shipped to the OpenAI platform
    store = await anyio.to_thread.run_sync(lambda: MemoryStore.open(path, mode="hybrid"))
    remember(store, namespace=NS, text="Deploys freeze every Friday after the payment incident.")
    tasks = SqliteTaskRepository.from_store(store)
    task_id = tasks.create_task("Can we deploy the payment fix on Friday?", namespace=NS)
    agent = Agent[Session](name="release assistant", instructions=broker_instructions, model=EchoModel())
    async with (
        open_selector(default_sources(store), deadline=0.25, mode=store.mode) as selector,
        open_broker(selector=selector, tasks=tasks, conversations=tasks) as broker,
    ):
        session = Session(broker=broker, task_id=task_id)
        result = await Runner.run(
            agent, "Deploy on Friday?", context=session, run_config=RunConfig(tracing_disabled=True)
        )
    store.close()
    print(result.final_output)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", metavar="DB_FILE", help="the SQLite file it writes (created if missing)")
    args = parser.parse_args()
    try:
        asyncio.run(main(args.db))
    except (StoreError, ConfigError) as e:  # a directory, not a database, a URL, no permission
        parser.exit(2, f"error: {e}\n")
