"""The store's embedder, checked at the boundary: what it returns is one unit row of `dim`
finite values per text, or an `EmbedderError` says what it returned instead.

A vector that is not is never stored or searched with: a NaN row once written made the
namespace's mean cosine NaN and closed its gate on every later turn, and a row of another
length made every later load of the namespace's vectors fail. Rows that are not of unit length
(a model run without normalisation: the `Embedder` protocol asks for unit rows) are scaled to
it, with a warning once per embedder: every score reads cosines as dot products, and a model
whose rows were 7 long recalled memories for "what time is it". A zero row has no direction
and is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

import numpy as np

from broker.log import get_logger
from sources._exceptions import EmbedderError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from broker.abc import Embedder


logger = get_logger(__name__)

UNIT_TOLERANCE = 1e-3
"""How far a row's length may be from 1 before it is scaled to unit length (float32 rounding
of a normalised row stays within about 1e-6)."""


class WrappedEmbedder:
    """An `Embedder` around another, `inner`, whose model id and dimension it carries; subclasses
    say what `embed` adds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim


class CheckedEmbedder(WrappedEmbedder):
    """An `Embedder` whose every answer is checked (`checked_vectors`); `inner` is the one wrapped."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._warned = False

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = checked_vectors(self.inner.embed(texts), len(texts), self.inner.dim, self.inner.model_id)
        norms = np.linalg.norm(vectors, axis=1)
        off = np.abs(norms - 1.0) > UNIT_TOLERANCE
        if not off.any():
            return vectors
        if not norms.all():
            zero = int((norms == 0).sum())
            msg = f"embedder {self.inner.model_id!r} returned {zero} zero vectors: they point nowhere"
            raise EmbedderError(msg)
        if not self._warned:
            self._warned = True
            logger.warning(
                "store.embedder.not_unit",
                model_id=self.inner.model_id,
                norm=round(float(norms[off][0]), 4),
                hint="its rows are scaled to unit length; normalise them in the model "
                "(sentence-transformers: normalize_embeddings=True)",
            )
        scaled = vectors.copy()  # never the model's own array (it may keep it)
        scaled[off] /= norms[off, None]
        return scaled


@overload
def checked(embedder: Embedder) -> Embedder: ...
@overload
def checked(embedder: None) -> None: ...
def checked(embedder: Embedder | None) -> Embedder | None:
    """`embedder` behind a `CheckedEmbedder` (once: a checked one is returned as it is)."""
    if embedder is None or isinstance(embedder, CheckedEmbedder):
        return embedder
    return CheckedEmbedder(embedder)


def checked_vectors(vectors: object, count: int, dim: int, model_id: str) -> npt.NDArray[np.float32]:
    """`vectors` as a float32 (count, dim) array of finite values; EmbedderError if they are not."""
    try:
        array = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        msg = f"embedder {model_id!r} returned {type(vectors).__name__}, not an array of numbers: {exc}"
        raise EmbedderError(msg) from None
    if array.shape != (count, dim):
        msg = f"embedder {model_id!r} returned shape {array.shape} for {count} texts, not {(count, dim)}"
        raise EmbedderError(msg)
    if not np.isfinite(array).all():
        bad = int((~np.isfinite(array).all(axis=1)).sum())
        msg = f"embedder {model_id!r} returned {bad} of {count} vectors holding NaN or infinite values"
        raise EmbedderError(msg)
    return array


__all__ = ["CheckedEmbedder", "WrappedEmbedder", "checked", "checked_vectors"]
