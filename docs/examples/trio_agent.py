"""The same loop under trio: the broker is anyio all the way down.

Run: python docs/examples/trio_agent.py memory.db
"""

from __future__ import annotations

import argparse

import trio

from broker import ConfigError, Namespace, SessionContext, Turn, open_broker, open_selector
from sources import MemoryStore, SqliteTaskRepository, StoreError, WriterSession, default_sources, remember

NS = Namespace(tenant_id="acme", project_id="web")


async def main(path: str) -> None:
    store = await trio.to_thread.run_sync(lambda: MemoryStore.open(path, mode="hybrid"))
    remember(
        store,
        namespace=NS,
        kind="memorule",
        memorule_kind="convention",
        subject="Release notes format",
        body="Release notes list every database migration before the features.",
        applies_to={"persona": "release-bot"},
        session=WriterSession(session_id="release-setup-1", persona="release-bot"),  # who wrote it
    )
    tasks = SqliteTaskRepository.from_store(store)
    task_id = tasks.create_task(
        "Write the release notes for version 2.4 and its database migrations", namespace=NS
    )
    async with (
        open_selector(default_sources(store), deadline=0.25, mode=store.mode) as selector,
        open_broker(selector=selector, tasks=tasks, conversations=tasks) as broker,
    ):
        ctx = await broker.assemble(
            Turn(
                task_id=task_id,
                namespace=NS,
                window=32_000,
                input_budget=4_000,
                context=SessionContext(persona="release-bot", surface="chat"),
            )
        )
    store.close()
    print("memorules:", ctx.trace["memorule_ids"] != [])
    print("active task last:", ctx.blocks[-1].kind == "task")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", metavar="DB_FILE", help="the SQLite file it writes (created if missing)")
    args = parser.parse_args()
    try:
        trio.run(main, args.db)
    except (StoreError, ConfigError) as e:  # a directory, not a database, a URL, no permission
        parser.exit(2, f"error: {e}\n")
