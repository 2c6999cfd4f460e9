from __future__ import annotations

import pytest
import trio
from store_kit import StoreOpener

from broker import BrokerClosedError, Namespace, ValidationError
from sources._tasks import SqliteTaskRepository
from sources.storage._engine import Engine

NS = Namespace(tenant_id="acme", project_id="atlas")
OTHER = Namespace(tenant_id="globex", project_id="atlas")


@pytest.fixture
def db(make_store: StoreOpener) -> Engine:
    """The engine under test, on a fresh database (the store that opened it closes it)."""
    return make_store(mode="lexical").engine


@pytest.fixture
def repo(db):
    return SqliteTaskRepository(db)


async def test_create_then_get_returns_the_task(repo):
    """A created task reads back with its description and status."""
    tid = repo.create_task("Plan the migration", namespace=NS)
    task = await repo.get_task(tid, namespace=NS)
    assert task is not None
    assert (task.task_id, task.description, task.status) == (tid, "Plan the migration", "active")
    assert task.created_at == task.updated_at


async def test_tasks_never_cross_namespaces(repo):
    """A task id is looked up only inside its own namespace."""
    repo.create_task("Plan", namespace=NS, task_id="t1")
    repo.create_task("Other tenant's plan", namespace=OTHER, task_id="t1")
    mine = await repo.get_task("t1", namespace=NS)
    assert mine is not None
    assert mine.description == "Plan"
    assert await repo.get_task("t1", namespace=Namespace(tenant_id="nobody")) is None
    repo.set_status("t1", "completed", namespace=OTHER)
    assert [t.description for t in await repo.completed_tasks(namespace=OTHER, limit=5)] == [
        "Other tenant's plan"
    ]
    assert await repo.completed_tasks(namespace=NS, limit=5) == []


async def test_completed_tasks_are_the_completed_ones_newest_first(repo):
    """Only `completed` tasks are listed, most recently updated first, up to the limit."""
    for i, status in enumerate(["completed", "cancelled", "completed", "failed", "active", "completed"]):
        repo.create_task(f"task {i}", namespace=NS, task_id=f"t{i}")
        if status != "active":
            repo.set_status(f"t{i}", status, namespace=NS)
    repo.append_turn("t0", "user", "touch t0 last", namespace=NS)
    done = await repo.completed_tasks(namespace=NS, limit=5)
    assert [t.task_id for t in done] == ["t0", "t5", "t2"]
    assert all(t.status == "completed" for t in done)
    assert [t.task_id for t in await repo.completed_tasks(namespace=NS, limit=1)] == ["t0"]


async def test_turns_read_back_in_order(repo):
    """Conversation turns come back oldest first, with their roles."""
    repo.create_task("Plan", namespace=NS, task_id="t1")
    repo.append_turn("t1", "user", "first", namespace=NS)
    repo.append_turn("t1", "assistant", "second", namespace=NS)
    repo.append_turn("t1", "user", "third", namespace=NS)
    turns = await repo.turns("t1", namespace=NS)
    assert [(t.role, t.text) for t in turns] == [
        ("user", "first"),
        ("assistant", "second"),
        ("user", "third"),
    ]
    assert await repo.turns("t1", namespace=OTHER) == []


def test_bad_input_is_rejected_with_every_field_error(repo):
    """Bad statuses, roles, texts and unknown tasks raise ValidationError; nothing is written."""
    with pytest.raises(ValidationError) as info:
        repo.create_task("", namespace=NS, status="done")
    assert {e.field for e in info.value.errors} == {"description", "status"}
    repo.create_task("Plan", namespace=NS, task_id="t1")
    with pytest.raises(ValidationError, match="exists"):
        repo.create_task("Again", namespace=NS, task_id="t1")
    with pytest.raises(ValidationError, match="status"):
        repo.set_status("t1", "finished", namespace=NS)
    with pytest.raises(ValidationError, match="unknown"):
        repo.set_status("nope", "completed", namespace=NS)
    with pytest.raises(ValidationError) as info:
        repo.append_turn("t1", "narrator", "\x00", namespace=NS)
    assert {e.field for e in info.value.errors} == {"role", "text"}
    with pytest.raises(ValidationError, match="unknown"):
        repo.append_turn("t1", "user", "hello", namespace=OTHER)


async def test_bad_history_limit_is_rejected(repo):
    """A negative or huge history limit is a ValidationError, zero is an empty list."""
    with pytest.raises(ValidationError, match="limit"):
        await repo.completed_tasks(namespace=NS, limit=-1)
    assert await repo.completed_tasks(namespace=NS, limit=0) == []


async def test_shares_the_store_file(make_store: StoreOpener):
    """Built from a MemoryStore, the repository uses the same database and tables."""
    store = make_store(mode="lexical")
    repo = SqliteTaskRepository.from_store(store)
    store.add_entry("a memory", namespace=NS)
    repo.create_task("Plan", namespace=NS, task_id="t1")
    assert (await repo.get_task("t1", namespace=NS)) is not None


async def test_closed_database_raises_broker_closed(db):
    """Reads after the database closed fail loudly, not silently empty."""
    repo = SqliteTaskRepository(db)
    db.close()
    with pytest.raises(BrokerClosedError):
        await repo.get_task("t1", namespace=NS)


async def test_cancelled_read_returns_promptly(repo):
    """A read cancelled by its caller's scope ends the call (the worker finishes first)."""
    repo.create_task("Plan", namespace=NS, task_id="t1")
    with trio.move_on_after(0) as scope:
        await repo.get_task("t1", namespace=NS)
    assert scope.cancelled_caught


async def test_delete_task_removes_it_and_its_turns_in_its_namespace_only(repo):
    """delete_task drops the task and its turns; the same id in another namespace stays."""
    repo.create_task("Plan", namespace=NS, task_id="t1")
    repo.append_turn("t1", "user", "Plan it", namespace=NS)
    repo.create_task("Other tenant's plan", namespace=OTHER, task_id="t1")
    assert repo.delete_task("t1", namespace=NS) is True
    assert await repo.get_task("t1", namespace=NS) is None
    assert await repo.turns("t1", namespace=NS) == []
    assert await repo.get_task("t1", namespace=OTHER) is not None
    assert repo.delete_task("t1", namespace=NS) is False
    repo.create_task("Plan again", namespace=NS, task_id="t1")  # the id is free again
