"""A LangGraph agent whose long-term memory is the broker: pass `store=BrokerStore(...)`.

No model is called: the `answer` node is deterministic. Run:
python docs/examples/langgraph_agent.py memory.db
"""

from __future__ import annotations

import argparse
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from broker import ConfigError
from context_broker.langgraph import BrokerStore
from sources import MemoryStore, StoreError


class State(TypedDict, total=False):
    """Who is talking, what they said, and the reply."""

    user: str
    message: str
    reply: str


def remember(state: State, runtime: Runtime) -> State:
    """Store what the user tells us (a real agent would extract facts with its model)."""
    if state["message"].startswith("Remember:"):
        note = state["message"].removeprefix("Remember:").strip()
        runtime.store.put((state["user"], "notes"), f"note-{abs(hash(note))}", {"text": note})
    return {}


def answer(state: State, runtime: Runtime) -> State:
    """Search memory through the broker's calibrated floor; nothing relevant means no memory."""
    if state["message"].startswith("Remember:"):
        return {"reply": "Noted."}
    hits = runtime.store.search((state["user"], "notes"), query=state["message"], limit=3)
    return {"reply": f"From memory: {hits[0].value['text']}" if hits else "Nothing in memory about that."}


def build(store: BrokerStore):  # noqa: ANN201 - a compiled LangGraph graph
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    return builder.compile(store=store)


def main(path: str) -> None:
    with MemoryStore.open(path, mode="hybrid") as memory:
        graph = build(BrokerStore(memory))
        for message in (
            "Remember: the staging database is rebuilt every Sunday night.",
            "Remember: Ada prefers release notes as bullet lists.",
            "When is the staging database rebuilt?",
            "What time is it?",
        ):
            print(graph.invoke({"user": "ada", "message": message})["reply"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", metavar="DB_FILE", help="the SQLite file it writes (created if missing)")
    args = parser.parse_args()
    try:
        main(args.db)
    except (StoreError, ConfigError) as e:  # a directory, not a database, a URL, no permission
        parser.exit(2, f"error: {e}\n")
