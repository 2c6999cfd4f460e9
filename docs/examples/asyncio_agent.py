"""A plain asyncio agent loop: one task, one `assemble` per turn, the reply appended, then done.

Run: python docs/examples/asyncio_agent.py memory.db
"""

from __future__ import annotations

import argparse
import asyncio

import anyio

from broker import ConfigError, Namespace, Turn, open_broker, open_selector
from sources import MemoryStore, SqliteTaskRepository, StoreError, default_sources, remember

NS = Namespace(tenant_id="acme", project_id="web")


def fake_model(context: str, message: str) -> str:
    """Stands in for the model call: answers from what the context holds."""
    if "Monday" in message:
        return "Scheduled for Monday morning."
    if "freeze every Friday" in context:
        return "Not on Friday: deploys freeze after the payment incident. Monday works."
    return f"Working on: {message}"


async def main(path: str) -> None:
    store = await anyio.to_thread.run_sync(lambda: MemoryStore.open(path, mode="hybrid"))
    remember(store, namespace=NS, text="Deploys freeze every Friday after the payment incident.")
    tasks = SqliteTaskRepository.from_store(store)
    # The task: what the agent works on across turns (the only thing memories are selected for).
    task_id = tasks.create_task("Deploy the payment fix to production this Friday", namespace=NS)
    async with (
        open_selector(default_sources(store), deadline=0.25, mode=store.mode) as selector,
        open_broker(selector=selector, tasks=tasks, conversations=tasks) as broker,
    ):
        for message in ("Can it go out on Friday?", "OK, schedule it for Monday."):
            # A turn: one user message, one assembled context, one model call.
            tasks.append_turn(task_id, "user", message, namespace=NS)
            ctx = await broker.assemble(  # the latest user message joins the task in the query
                Turn(task_id=task_id, namespace=NS, window=128_000, input_budget=8_000, message=message)
            )
            reply = fake_model(ctx.text, message)
            tasks.append_turn(task_id, "assistant", reply, namespace=NS)
            print(f"turn {ctx.trace['turn_id'][:8]}: {ctx.trace['memory_selected']} memories -> {reply}")
    # Completed tasks become history for later tasks: past context, never instructions.
    tasks.set_status(task_id, "completed", namespace=NS)
    store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", metavar="DB_FILE", help="the SQLite file it writes (created if missing)")
    args = parser.parse_args()
    try:
        asyncio.run(main(args.db))
    except (StoreError, ConfigError) as e:  # a directory, not a database, a URL, no permission
        parser.exit(2, f"error: {e}\n")
