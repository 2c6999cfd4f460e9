"""Tests of a conversation turn read in its context: the neighbours re-rank, the scores stay."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker import Namespace
from sources import MemoryStore, NewEntry, Recalled
from sources.embedding._embedder import MiniLMEmbedder, load_default_embedder
from sources.relevance._scorer import Relevance
from sources.relevance._turn_context import (
    NEIGHBOUR_WEIGHT,
    QUESTION_WEIGHT,
    REACH,
    STRETCH,
    STRETCH_WEIGHT,
    asks,
    in_context,
    standing,
)

if TYPE_CHECKING:
    from pathlib import Path

NS = Namespace(tenant_id="t", project_id="p")


def _rel(score: float) -> Relevance:
    return Relevance(score=score, qpp=1.0, band=score, base=score)


candidates = st.lists(
    st.tuples(st.floats(0.0, 1.0), st.integers(1, 60), st.booleans()),
    max_size=30,
    unique_by=lambda c: c[1],
)


@given(candidates)
def test_the_reranking_hands_out_the_same_scores_best_first(cands: list[tuple[float, int, bool]]) -> None:
    """Every input appears once, and the scores handed out are the scorer's, best first."""
    ranked = in_context(
        [_rel(s) for s, _, _ in cands],
        [r for _, r, _ in cands],
        [e for _, _, e in cands],
        [True] * len(cands),
    )
    assert sorted(i for i, _ in ranked) == list(range(len(cands)))
    assert [rel.score for _, rel in ranked] == sorted((s for s, _, _ in cands), reverse=True)


@given(candidates, st.floats(0.01, 1.0))
def test_a_floor_keeps_the_places_that_clear_it_and_nothing_else(
    cands: list[tuple[float, int, bool]], floor: float
) -> None:
    """With a floor the ranking is the unfloored one cut where the handed-out scores fall under it."""
    args = (
        [_rel(s) for s, _, _ in cands],
        [r for _, r, _ in cands],
        [e for _, _, e in cands],
        [True] * len(cands),
    )
    whole = in_context(*args)
    assert in_context(*args, floor) == [
        (i, rel) for i, rel in whole if rel.score > 0.0 and rel.score >= floor
    ]


@given(candidates)
def test_a_memory_moved_by_its_neighbours_keeps_its_own_score_beside_the_one_it_takes(
    cands: list[tuple[float, int, bool]],
) -> None:
    """`own` is the input's score exactly when the memory took another score, else None."""
    ranked = in_context(
        [_rel(s) for s, _, _ in cands],
        [r for _, r, _ in cands],
        [e for _, _, e in cands],
        [True] * len(cands),
    )
    for i, rel in ranked:
        assert rel.own == (None if rel.score == cands[i][0] else cands[i][0])


@given(candidates, st.lists(st.booleans(), min_size=30, max_size=30))
def test_whatever_turns_ask_the_scores_handed_out_are_the_scorers(
    cands: list[tuple[float, int, bool]], asking: list[bool]
) -> None:
    """With any mix of questions, every input appears once and the scores go out best first."""
    ranked = in_context(
        [_rel(s) for s, _, _ in cands],
        [r for _, r, _ in cands],
        [e for _, _, e in cands],
        asking[: len(cands)],
    )
    assert sorted(i for i, _ in ranked) == list(range(len(cands)))
    assert [rel.score for _, rel in ranked] == sorted((s for s, _, _ in cands), reverse=True)


@given(candidates)
def test_facts_are_ranked_on_their_own_words(cands: list[tuple[float, int, bool]]) -> None:
    """Without an episodic candidate every memory keeps its own score."""
    ranked = in_context(
        [_rel(s) for s, _, _ in cands], [r for _, r, _ in cands], [False] * len(cands), [True] * len(cands)
    )
    assert all(rel.score == cands[i][0] for i, rel in ranked)


@given(candidates)
def test_a_turn_without_evidence_of_its_own_gains_nothing(cands: list[tuple[float, int, bool]]) -> None:
    """A zero score stays the key of a turn, however well its neighbours match."""
    keys = standing(
        [s for s, _, _ in cands], [r for _, r, _ in cands], [e for _, _, e in cands], [True] * len(cands)
    )
    assert all(k == 0.0 for k, (s, _, _) in zip(keys, cands, strict=True) if s == 0.0)


def test_a_turn_counts_the_best_episodic_neighbour_within_reach() -> None:
    """The key adds the weight times the best episodic score within REACH rowids, no further
    (and, all of them within STRETCH, the stretch's best)."""
    keys = standing(
        [0.2, 0.9, 0.8, 0.7], [10, 10 + REACH, 10 + REACH + 1, 11], [True, True, True, False], [False] * 4
    )
    assert keys[0] == pytest.approx(0.2 + NEIGHBOUR_WEIGHT * 0.9 + STRETCH_WEIGHT * 0.9)  # 11 is no turn
    assert keys[1] == pytest.approx(0.9 + NEIGHBOUR_WEIGHT * 0.8 + STRETCH_WEIGHT * 0.9)
    assert keys[2] == pytest.approx(0.8 + NEIGHBOUR_WEIGHT * 0.9 + STRETCH_WEIGHT * 0.9)
    assert keys[3] == pytest.approx(0.7 * (1 + STRETCH_WEIGHT))


def test_the_turn_right_after_a_question_adds_the_questions_score() -> None:
    """The turn after an episodic question adds QUESTION_WEIGHT x its score besides the neighbour
    term; the turn before it, a turn two after it, a fact after it and a turn after a statement
    add none."""
    scores, rowids = [0.8, 0.3, 0.3, 0.3], [20, 21, 19, 22]
    keys = standing(scores, rowids, [True] * 4, [True, False, False, False])
    context = (NEIGHBOUR_WEIGHT + STRETCH_WEIGHT) * 0.8  # every turn here is in the question's stretch
    assert keys[1] == pytest.approx(0.3 + context + QUESTION_WEIGHT * 0.8)
    assert keys[2] == pytest.approx(0.3 + context)
    assert keys[3] == pytest.approx(0.3 + context)
    fact = standing(scores, rowids, [True, False, True, True], [True, False, False, False])
    assert fact[1] == pytest.approx(0.3 * (1 + STRETCH_WEIGHT))  # its own stretch
    statement = standing(scores, rowids, [True] * 4, [False] * 4)
    assert statement[1] == pytest.approx(0.3 + context)


def test_a_turn_adds_the_best_score_of_its_stretch_and_no_further() -> None:
    """Beyond REACH, a turn within STRETCH rowids of a strong turn adds STRETCH_WEIGHT x that
    turn's score; one STRETCH + 1 away adds only the best of its own stretch (itself, alone)."""
    scores, rowids = [0.9, 0.3, 0.3], [40, 40 + STRETCH, 40 + STRETCH + 1]
    keys = standing(scores, rowids, [True] * 3, [False] * 3)
    assert keys[0] == pytest.approx(0.9 + STRETCH_WEIGHT * 0.9)
    assert keys[1] == pytest.approx(0.3 + NEIGHBOUR_WEIGHT * 0.3 + STRETCH_WEIGHT * 0.9)
    assert keys[2] == pytest.approx(0.3 + NEIGHBOUR_WEIGHT * 0.3 + STRETCH_WEIGHT * 0.3)


@given(st.floats(0.01, 1.0), st.floats(0.01, 1.0))
def test_a_turn_nothing_raises_and_a_fact_rank_by_their_own_scores(turn: float, fact: float) -> None:
    """A turn with no other turn in its stretch gains no more than a fact does: the higher own
    score ranks first, whichever kind it is (a mixed store: notes beside a conversation)."""
    keys = standing([turn, fact], [1, 100], [True, False], [False, False])
    assert (keys[0] > keys[1]) == (turn > fact)
    assert (keys[0] == keys[1]) == (turn == fact)


def test_a_question_is_a_text_holding_a_question_mark() -> None:
    """`asks` reads the '?' anywhere (a caption may follow it), as the engines do."""
    assert asks("Mel: How was the pottery class? [shares a photo: a bowl]")
    assert not asks("Caroline: Loved it, I made a bowl.")


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return load_default_embedder()


def _recalled(tmp_path: Path, embedder: MiniLMEmbedder, memory_type: str) -> list[tuple[str, float]]:
    filler = [f"Speaker: topic {i} and the weather in town {i}" for i in range(30)]
    turns = [
        "Mel: How was the pottery class on Saturday?",
        "Caroline: Loved it, I made a bowl for my mom.",
        *filler,
        "Caroline: I made the class schedule for the book club.",
    ]
    entries = [NewEntry(id=f"m{i}", text=t, memory_type=memory_type) for i, t in enumerate(turns)]
    with MemoryStore.open(tmp_path / f"{memory_type}.db", mode="hybrid", embedder=embedder) as store:
        store.add_entries(entries, namespace=NS)
        found = store.recall(
            "What did Caroline make in her pottery class?", namespace=NS, min_score=0.0, limit=3
        )
    return [(r.memory.id, r.score) for r in found]


def test_a_reply_rises_with_the_turn_it_answers(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    """Stored as turns, the reply after the matching question outranks a distant turn that
    matches better on its own words, and the question it answers; stored as facts, it does not;
    the scores are the same."""
    turns = _recalled(tmp_path, embedder, "episodic")
    facts = _recalled(tmp_path, embedder, "semantic")
    assert [i for i, _ in turns] == ["m1", "m0", "m32"]
    assert [i for i, _ in facts] == ["m0", "m32", "m1"]
    assert [s for _, s in turns] == pytest.approx([s for _, s in facts])


POTTERY = "What did Caroline make in her pottery class?"


def _lexical_turns(memory_type: str) -> list[NewEntry]:
    filler = [(f"f{i}", f"Speaker: topic {i} and the weather in town {i}") for i in range(30)]
    turns = [
        ("t0", "Mel: How was the pottery class on Saturday?"),
        ("t1", "Caroline: Loved it, I made a bowl for my mom."),
        *filler,
        ("d", "Caroline: I made dinner for my mom."),
    ]
    return [NewEntry(id=i, text=t, memory_type=memory_type) for i, t in turns]


def _lexical_recall(tmp_path: Path, memory_type: str, types: list[str] | None) -> list[Recalled]:
    with MemoryStore.open(tmp_path / f"{memory_type}-{types}.db", mode="lexical") as store:
        store.add_entries(_lexical_turns(memory_type), namespace=NS)
        return store.recall(POTTERY, namespace=NS, min_score=0.0, limit=3, types=types)


def _lexical(tmp_path: Path, memory_type: str, types: list[str] | None) -> list[tuple[str, float]]:
    return [(r.memory.id, r.score) for r in _lexical_recall(tmp_path, memory_type, types)]


@pytest.mark.parametrize("typed", [False, True])
def test_lexical_recall_reads_a_turn_in_its_context_too(tmp_path: Path, typed: bool) -> None:
    """Lexical mode (from the shared retrieval, and typed from the index) ranks the reply after
    the matching question above the question and an equally matching distant turn; as facts,
    the other way."""
    turns = _lexical(tmp_path, "episodic", ["episodic"] if typed else None)
    facts = _lexical(tmp_path, "semantic", ["semantic"] if typed else None)
    assert [i for i, _ in turns] == ["t1", "t0", "d"]
    assert [i for i, _ in facts] == ["t0", "d", "t1"]
    assert [s for _, s in turns] == pytest.approx([s for _, s in facts])


def test_a_turn_its_neighbours_moved_says_the_score_of_its_own_words(tmp_path: Path) -> None:
    """A recalled turn that took another rank's score carries its own (the score it has as a
    fact): here every one, the reply rising above its question and the distant turn."""
    turns = _lexical_recall(tmp_path, "episodic", None)
    facts = {r.memory.id: r.score for r in _lexical_recall(tmp_path, "semantic", None)}
    assert [(r.memory.id, r.own_score) for r in turns] == [
        ("t1", pytest.approx(facts["t1"])),
        ("t0", pytest.approx(facts["t0"])),
        ("d", pytest.approx(facts["d"])),
    ]


def test_episodic_notes_that_name_no_speaker_are_ranked_on_their_own_words(tmp_path: Path) -> None:
    """Episodic notes of unrelated events written one after another (no speaker opens them, not
    messages) rank as facts do; the same texts as messages are read as turns."""

    def recalled(kind: str, memory_type: str) -> list[str]:
        said = [(e.id, *e.text.split(": ", 1)) for e in _lexical_turns("episodic")]
        entries = [
            NewEntry(id=i, text=f"{words} ({who})", kind=kind, memory_type=memory_type)
            for i, who, words in said
        ]
        with MemoryStore.open(tmp_path / f"{kind}-{memory_type}.db", mode="lexical") as store:
            store.add_entries(entries, namespace=NS)
            return [r.memory.id for r in store.recall(POTTERY, namespace=NS, min_score=0.0, limit=3)]

    assert recalled("note", "episodic") == recalled("note", "semantic") == ["t0", "d", "t1"]
    assert recalled("message", "episodic") == ["t1", "t0", "d"]
