"""The store's embedder is checked at the boundary (`sources.embedding._checked`): vectors no search could
use are refused with an `EmbedderError`, never written, never cached for the process."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
import structlog.testing
from hypothesis import given
from hypothesis import strategies as st

from broker import Namespace
from sources import EmbedderError, MemoryStore, NewEntry
from sources.embedding._checked import CheckedEmbedder, checked, checked_vectors

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    import numpy.typing as npt

NS = Namespace(tenant_id="t")


class Ones:
    """A fake model: every text is the unit vector along the first axis."""

    model_id = "ones"
    dim = 4

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed every text as the first axis."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out


class Broken(Ones):
    """`Ones`, except for the texts holding `bad`: NaN rows, or (`short`) the whole answer one value short."""

    def __init__(self, bad: str, *, short: bool = False) -> None:
        self.bad, self.short = bad, short

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed as `Ones`, then break the batch holding `bad`."""
        out = super().embed(texts)
        hit = [self.bad in t for t in texts]
        if any(hit) and self.short:
            return out[:, :-1]
        out[np.array(hit, dtype=bool)] = np.nan
        return out


@given(st.integers(0, 5), st.integers(1, 8), st.floats(-1, 1, width=32))
def test_finite_vectors_of_the_right_shape_pass_as_they_are(count: int, dim: int, value: float) -> None:
    """What a sound embedder returns comes back unchanged, as float32."""
    vectors = np.full((count, dim), value, dtype=np.float64)
    got = checked_vectors(vectors, count, dim, "m")
    assert got.dtype == np.float32
    assert np.array_equal(got, vectors.astype(np.float32))


@pytest.mark.parametrize(
    ("vectors", "says"),
    [
        (np.ones((2, 3), dtype=np.float32), "shape (2, 3) for 2 texts, not (2, 4)"),
        (np.ones((3, 4), dtype=np.float32), "shape (3, 4) for 2 texts"),
        (
            np.array([[1, 0, 0, np.inf], [1, 0, 0, 0]], dtype=np.float32),
            "1 of 2 vectors holding NaN or infinite",
        ),
        ([["a", "b", "c", "d"]] * 2, "not an array of numbers"),
    ],
)
def test_vectors_no_search_could_use_are_an_embedder_error(vectors: object, says: str) -> None:
    """Another shape, NaN or infinity, or no numbers at all: an EmbedderError saying which, naming the model."""
    with pytest.raises(EmbedderError, match="embedder 'm'") as caught:
        checked_vectors(vectors, 2, 4, "m")
    assert says in str(caught.value)


def test_a_store_checks_its_embedder_once() -> None:
    """The store's embedder is wrapped once; None stays None."""
    inner = Ones()
    wrapped = checked(inner)
    assert isinstance(wrapped, CheckedEmbedder)
    assert wrapped.inner is inner
    assert (wrapped.model_id, wrapped.dim) == ("ones", 4)
    assert checked(wrapped) is wrapped
    assert checked(None) is None


@pytest.mark.parametrize("short", [False, True])
def test_a_write_the_embedder_fails_writes_nothing(tmp_path: Path, short: bool) -> None:
    """A batch whose vectors come back NaN (or of another shape) raises EmbedderError and writes
    no row of the batch; the store's other memories stay searchable."""
    with MemoryStore.open(tmp_path / "c.db", mode="hybrid", embedder=Broken("poison", short=short)) as store:
        store.add_entry("the deploy runbook lives in the wiki", namespace=NS)
        with pytest.raises(EmbedderError):
            store.add_entries([NewEntry(text="a sound note"), NewEntry(text="a poison note")], namespace=NS)
        assert store.stats(namespace=NS)["entries"] == 1
        found = store.recall("where does the deploy runbook live", namespace=NS, min_score=0.0)
        assert [r.memory.text for r in found] == ["the deploy runbook lives in the wiki"]


class WrongDim(Ones):
    """A model that says 4 dimensions and returns 3 (under another fake's model id)."""

    model_id = "shared-id"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed as `Ones`, one dimension short."""
        return super().embed(texts)[:, :3]


class SharedId(Ones):
    """A sound model under the id `WrongDim` also claims."""

    model_id = "shared-id"


def test_a_model_that_returns_the_wrong_dimension_fails_at_open_and_poisons_nothing(tmp_path: Path) -> None:
    """A dense store with such a model fails when it opens (its first embedding), with an
    EmbedderError; a sound model of the same id opened next in the process is unaffected."""
    with pytest.raises(EmbedderError, match=r"shape \(\d+, 3\)"):
        MemoryStore.open(tmp_path / "w.db", mode="hybrid", embedder=WrongDim())
    with MemoryStore.open(tmp_path / "s.db", mode="hybrid", embedder=SharedId()) as store:
        store.add_entry("the deploy runbook lives in the wiki", namespace=NS)
        assert store.recall("where does the deploy runbook live", namespace=NS, min_score=0.0)


class Scaled(Ones):
    """`Ones` times `scale`: rows of that length (a model run without normalisation)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed as `Ones`, scaled."""
        return super().embed(texts) * np.float32(self.scale)


def test_rows_not_of_unit_length_are_scaled_to_it_with_one_warning() -> None:
    """Every score reads cosines as dot products: rows 7 long are scaled to unit length (the
    model's own array untouched), and the embedder is warned about once, not at every call."""
    inner = Scaled(7.0)
    embedder = CheckedEmbedder(inner)
    with structlog.testing.capture_logs() as logs:
        first = embedder.embed(["a", "b"])
        again = embedder.embed(["c"])
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.allclose(np.linalg.norm(again, axis=1), 1.0)
    assert [e["event"] for e in logs] == ["store.embedder.not_unit"]
    assert logs[0]["norm"] == pytest.approx(7.0)
    with structlog.testing.capture_logs() as logs:
        assert np.array_equal(CheckedEmbedder(Ones()).embed(["d"]), Ones().embed(["d"]))
    assert logs == []


def test_a_zero_row_is_refused() -> None:
    """A zero vector points nowhere: an EmbedderError, never a row scaled by zero."""
    with pytest.raises(EmbedderError, match="1 zero vectors"):
        CheckedEmbedder(Scaled(0.0)).embed(["a"])


class Words:
    """A fake model of 64 dimensions: a text is the sum of its words' fixed random vectors,
    normalised, times `scale`."""

    model_id = "words"
    dim = 64

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed each text as its words' vectors summed, of length `scale`."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i] += np.random.default_rng(sum(map(ord, word))).standard_normal(self.dim)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return (out * self.scale).astype(np.float32)


def test_a_model_run_without_normalisation_answers_as_the_normalised_one(tmp_path: Path) -> None:
    """Rows 7 long made "what time is it" recall memories (a trial's finding): scaled to unit
    length, the store selects what it selects with the same model normalised, and abstains on
    the off-topic task."""
    found = {}
    for scale in (1.0, 7.0):
        with MemoryStore.open(tmp_path / f"n{scale}.db", mode="hybrid", embedder=Words(scale)) as store:
            store.add_entries(
                [NewEntry(text=f"note {i} says the deploy runbook is in the wiki") for i in range(30)],
                namespace=NS,
            )
            found[scale] = [
                [r.memory.text for r in store.recall(task, namespace=NS)]
                for task in ("what time is it", "where is the deploy runbook")
            ]
    assert found[7.0] == found[1.0]
    assert found[7.0][0] == []
    assert found[7.0][1]


class OtherDim(Ones):
    """A sound model of 3 dimensions under the id `SharedId` (4 dimensions) also uses."""

    model_id = "shared-id"
    dim = 3


def test_two_models_of_one_id_but_not_one_dimension_never_share_a_cache(tmp_path: Path) -> None:
    """The process-wide off-topic vectors are kept per model id and dimension: a store of a
    3-dimensional model opened after a 4-dimensional one of the same id answers, not a numpy error."""
    for n, model in enumerate((SharedId(), OtherDim())):
        with MemoryStore.open(tmp_path / f"d{n}.db", mode="hybrid", embedder=model) as store:
            store.add_entry("the deploy runbook lives in the wiki", namespace=NS)
            assert store.recall("where does the deploy runbook live", namespace=NS, min_score=0.0)
