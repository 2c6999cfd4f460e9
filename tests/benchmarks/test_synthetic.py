"""The benchmark corpus stores real memories with their own vectors and asks tasks they answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from benchmarks import _synthetic
from sources import MemoryStore
from sources.storage._analysis import terms
from sources.storage._engine import CORPUS_ENTRIES, Slot

if TYPE_CHECKING:
    from pathlib import Path

DIM = 8


def _unit(rows: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _pool() -> _synthetic.Pool:
    stored = ["The payments service deploys through the canary pipeline.", "My dentist is Dr. Alvarez."]
    return _synthetic.Pool(stored=stored, vectors=_unit(5, 1), tasks=["Who is my dentist?"])


def test_the_first_entries_are_the_pool_memories_with_their_own_vectors(tmp_path: Path) -> None:
    """The pool's memories are the first entries, each with its own vector; every other entry's
    vector is near one of the other pool rows, never a copy of a stored memory's."""
    pool = _pool()
    store = MemoryStore.open(tmp_path / "s.db", mode="lexical")
    try:
        _synthetic.fill(
            store, 200, _synthetic.Generator(seed=1), texts=pool.stored, pool=pool.vectors, model_id="m"
        )
        with store.db.read() as conn:
            rows = conn.execute("SELECT rowid, id, text FROM entries ORDER BY rowid").fetchall()
            ns_id = conn.namespace_id(_synthetic.NS)
            assert ns_id is not None
            vectors = conn.stored_vectors(Slot(ns_id, CORPUS_ENTRIES), [r[0] for r in rows], "m", DIM)
    finally:
        store.close()
    assert [r[2] for r in rows[:2]] == list(pool.stored)
    own = np.stack([vectors[rows[0][0]], vectors[rows[1][0]]])
    assert np.allclose(own, pool.vectors[:2], atol=1e-2)
    others = np.stack([vectors[r[0]] for r in rows[2:]])
    assert (others @ pool.vectors[2:].T).max(axis=1).min() > 0.9  # near a recycled row
    assert (others @ pool.vectors[:2].T).max() < 0.99  # no copy of a stored memory's


def test_tasks_are_the_answerable_ones_or_trivial() -> None:
    """Every task is one of the answerable tasks or a trivial one, about a fifth trivial."""
    tasks = _synthetic.Generator(seed=2).tasks(500, ["hi", "thanks"], ["Who is my dentist?"])
    assert {t for t, trivial in tasks if not trivial} == {"Who is my dentist?"}
    assert {t for t, trivial in tasks if trivial} <= {"hi", "thanks"}
    assert 0.1 < sum(trivial for _, trivial in tasks) / len(tasks) < 0.3


def test_a_pool_shorter_than_its_memories_is_refused(tmp_path: Path) -> None:
    """Each stored memory needs its own vector: fewer pool rows than memories is an error."""
    store = MemoryStore.open(tmp_path / "s.db", mode="lexical")
    try:
        with pytest.raises(ValueError, match="pool vectors"):
            _synthetic.fill(store, 50, _synthetic.Generator(), texts=["a", "b", "c"], pool=_unit(2, 0))
    finally:
        store.close()


def test_the_real_memories_and_questions_say_where_they_come_from() -> None:
    """The real pool holds hundreds of memories and questions, from LoCoMo when it is beside the
    repository, else from our own sets; the synthetic words are none of theirs."""
    source, memories, questions = _synthetic.real_sets()
    assert source in {_synthetic.LOCOMO_SOURCE, _synthetic.OWN_SOURCE}
    assert len(memories) > 200
    assert len(questions) > 200
    words = {t for w in _synthetic.vocabulary() for t in terms(w)}
    assert not words & {t for q in questions for t in terms(q)}
