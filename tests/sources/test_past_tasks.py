"""The `past_tasks` source: a completed task enters only when it clears the floor for the turn's task,
scored on its own evidence (the active task continues or repeats it), whatever the memories."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_kit import StoreOpener

from broker import RECALL_MIN_SCORE, Namespace
from broker.abc import SourceRequest
from broker.testing import background_memories
from sources import MemoryStore, NewEntry, PastTaskSource, SqliteTaskRepository, StoreReader
from sources._past_tasks import (
    COSINE_MIDPOINT,
    COSINE_SLOPE,
    PAST_TASK_DEPTH,
    PastTaskText,
    lexical_logits,
    mean_odds,
)
from sources.storage._analysis import query_terms

if TYPE_CHECKING:
    from collections.abc import Iterator

NS = Namespace(tenant_id="acme", project_id="ops")
RELATED = "Upgrade the Postgres replica of the reporting database"
UNRELATED = "Order new ergonomic chairs for the design team"
TASK = "Plan the Postgres upgrade of the billing database"


@pytest.fixture(params=["lexical", "hybrid"])
def store(make_store: StoreOpener, request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    """Background notes, a note on the billing database and four tasks, in the recall mode
    under test, on the engine under test."""
    with make_store(mode=request.param) as s:
        s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=NS)
        s.add_entry("The billing database runs Postgres 13 on three nodes.", namespace=NS)
        repo = SqliteTaskRepository.from_store(s)
        for task_id, text, status in (
            ("related", RELATED, "completed"),
            ("unrelated", UNRELATED, "completed"),
            ("cancelled", "Postgres upgrade of the billing database, first attempt", "cancelled"),
            ("open", "Postgres upgrade of the billing database, second look", "active"),
        ):
            repo.create_task(text, namespace=NS, task_id=task_id)
            repo.append_turn(task_id, "user", f"{text}, please", namespace=NS)
            if status != "active":
                repo.set_status(task_id, status, namespace=NS)
        yield s


async def fetch(store: MemoryStore, task: str) -> dict[str, float]:
    source = PastTaskSource(StoreReader(store=store))
    got = await source.fetch(SourceRequest(task=task, namespace=NS, mode=store.mode))
    assert all(c.block == "history" and c.source == "past_tasks" for c in got)
    return {c.entry_id: c.score for c in got}


async def test_a_related_completed_task_clears_the_floor(store: MemoryStore) -> None:
    """The completed task about the same system clears the floor; the unrelated one does not."""
    got = await fetch(store, TASK)
    assert got["related"] >= RECALL_MIN_SCORE
    assert got.get("unrelated", 0.0) < RECALL_MIN_SCORE


async def test_only_completed_tasks_are_proposed(store: MemoryStore) -> None:
    """Cancelled and active tasks are never candidates, however close their text."""
    got = await fetch(store, TASK)
    assert not {"cancelled", "open"} & set(got)


@pytest.mark.parametrize("task", ["what time is it", "thanks!", "tell me a joke"])
async def test_a_trivial_task_gets_no_past_task(store: MemoryStore, task: str) -> None:
    """A trivial task brings no past task above the floor."""
    got = await fetch(store, task)
    assert all(score < RECALL_MIN_SCORE for score in got.values())


async def test_another_tenant_sees_none_of_them(store: MemoryStore) -> None:
    """Past tasks never cross namespaces."""
    source = PastTaskSource(StoreReader(store=store))
    other = Namespace(tenant_id="bobco")
    assert await source.fetch(SourceRequest(task=TASK, namespace=other)) == []


# -- a follow-up and the task it continues, with and without memories ----------------------

MIGRATION = "Migrate the billing service database from Postgres 14 to Postgres 16"
FOLLOW_UP = "Do the same Postgres 16 migration for the invoicing service"
OTHERS = {
    "chairs": "Order new ergonomic chairs for the design team",
    "kafka": "Rotate the expiring Kafka broker TLS certificates",
    "timesheet": "Track time spent on the invoicing project",
    "notes": "Write the release notes for the Lighthouse 2.3.1 hotfix release",
}
"""Completed tasks the follow-up does not continue; two share a word with it or with a trivial
task ("invoicing", "time", the digits of 2.3.1)."""
TRIVIAL = [
    "what time is it",
    "thanks!",
    "testing 1 2 3",
    "what day of the week is it today",
    "tell me a joke",
]


@pytest.fixture(params=["lexical", "dense", "hybrid"])
def mode(request: pytest.FixtureRequest) -> str:
    """The recall mode under test."""
    value: str = request.param
    return value


@pytest.fixture(params=["no memories", "memories"])
def follow_store(make_store: StoreOpener, mode: str, request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    """The migration and four other completed tasks, in a namespace with no memory at all or with
    the background notes and a note on the billing database."""
    with make_store(mode=mode) as s:
        if request.param == "memories":
            s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=NS)
            s.add_entry("The billing database runs Postgres 14 on three nodes.", namespace=NS)
        repo = SqliteTaskRepository.from_store(s)
        for task_id, text in {"migration": MIGRATION, **OTHERS}.items():
            repo.create_task(text, namespace=NS, task_id=task_id)
            repo.append_turn(task_id, "user", text, namespace=NS)
            repo.set_status(task_id, "completed", namespace=NS)
        yield s


async def scores(store: MemoryStore, task: str) -> dict[str, float]:
    """Every past task's score for `task` (the source at floor 0)."""
    source = PastTaskSource(StoreReader(store=store), min_score=0.0)
    got = await source.fetch(SourceRequest(task=task, namespace=NS, mode=store.mode))
    return {c.entry_id: c.score for c in got}


async def test_a_follow_up_gets_the_task_it_continues(follow_store: MemoryStore) -> None:
    """The follow-up clears the floor for the migration it continues, with or without memories."""
    got = await fetch(follow_store, FOLLOW_UP)
    assert set(got) == {"migration"}
    assert got["migration"] >= RECALL_MIN_SCORE


async def test_completed_tasks_the_follow_up_does_not_continue_stay_under_the_floor(
    follow_store: MemoryStore,
) -> None:
    """A completed task sharing one word with the follow-up ("invoicing") is not injected."""
    got = await scores(follow_store, FOLLOW_UP)
    assert all(got.get(task_id, 0.0) < RECALL_MIN_SCORE for task_id in OTHERS)


PARAPHRASE = "Upgrade invoicing's database like we did for billing"
"""The follow-up in other words: two distinctive terms shared with the migration ("database",
"billing"), its cosine with it 0.51 (under the dense view's even odds)."""


async def test_a_follow_up_in_other_words_gets_the_task_it_continues(follow_store: MemoryStore) -> None:
    """Where the shared terms see the continuation clearly, lexical and hybrid inject it, and no
    other task (dense, which reads only the cosine, may not)."""
    got = await fetch(follow_store, PARAPHRASE)
    if follow_store.mode == "dense":
        assert set(got) <= {"migration"}
    else:
        assert set(got) == {"migration"}


@given(a=st.floats(-30, 30), b=st.floats(-30, 30))
def test_the_mean_of_two_odds_lies_between_the_mean_and_the_larger_log_odds(a: float, b: float) -> None:
    """Symmetric, at least the mean of the two log-odds, at most the larger and less than ln 2 under it."""
    z = mean_odds(a, b)
    assert z == pytest.approx(mean_odds(b, a))
    assert (a + b) / 2 - 1e-9 <= z <= max(a, b) + 1e-9
    assert z >= max(a, b) - math.log(2) - 1e-9


def test_in_hybrid_a_refuting_view_lowers_the_other_by_ln_2_at_most() -> None:
    """The price of averaging odds, pinned: with the cosine at 0.1 (dense p near 0) a past task
    the shared terms put at p 0.5 stays under the floor, one they put at 0.6 or more clears it."""
    for lexical_p, kept in ((0.5, False), (0.6, True), (0.9, True)):
        z = math.log(lexical_p / (1 - lexical_p))
        hybrid = 1 / (1 + math.exp(-mean_odds(z, COSINE_SLOPE * (0.1 - COSINE_MIDPOINT))))
        assert (hybrid >= RECALL_MIN_SCORE) == kept
        assert hybrid == pytest.approx(
            lexical_p / (2 - lexical_p), abs=1e-3
        )  # p/2 / (1 - p/2): half the odds


@pytest.mark.parametrize("task", TRIVIAL)
async def test_a_trivial_task_pulls_in_no_past_task(follow_store: MemoryStore, task: str) -> None:
    """Small talk gets no past task, even one sharing its word ("time") or digits (2.3.1)."""
    assert await fetch(follow_store, task) == {}


async def test_a_past_task_scores_the_same_whatever_the_memories(make_store: StoreOpener, mode: str) -> None:
    """The score is the past task's own evidence: writing memories into the namespace changes it not."""
    with make_store(mode=mode) as s:
        repo = SqliteTaskRepository.from_store(s)
        repo.create_task(MIGRATION, namespace=NS, task_id="migration")
        repo.set_status("migration", "completed", namespace=NS)
        before = await scores(s, FOLLOW_UP)
        s.add_entries([NewEntry(text=t) for t in background_memories()], namespace=NS)
        assert await scores(s, FOLLOW_UP) == pytest.approx(before)


def past(*texts: str) -> list[PastTaskText]:
    return [
        PastTaskText(task_id=str(i), completed_at="2026-01-01", text=t, terms=frozenset(query_terms(t)))
        for i, t in enumerate(texts)
    ]


def test_one_shared_term_never_clears_the_floor() -> None:
    """One shared word, however rare and however short the task, never clears the floor alone."""
    filler = [f"Unrelated chore number {chr(97 + i)}{chr(97 + i)}" for i in range(PAST_TASK_DEPTH - 1)]
    (logit, *_) = lexical_logits(frozenset(query_terms("timesheet")), past("Approve the timesheet", *filler))
    assert 1 / (1 + math.exp(-logit)) < RECALL_MIN_SCORE


def test_the_digits_of_one_number_count_once() -> None:
    """'2.3.1' is one version, not three shared terms: 'testing 1 2 3' does not continue its notes."""
    (digits, words) = lexical_logits(frozenset(query_terms("testing 1 2 3")), past("Notes for 2.3.1", "Plan"))
    (versioned, _) = lexical_logits(
        frozenset(query_terms("Notes for 2.3.2")), past("Notes for 2.3.1", "Plan")
    )
    assert 1 / (1 + math.exp(-digits)) < RECALL_MIN_SCORE <= 1 / (1 + math.exp(-versioned))
    assert words < digits
