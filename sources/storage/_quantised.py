"""Vectors as a search reads them: float32 dot products, their 8-bit copies (`quantise`) and
products (`approx_dot`, on the processor's 8-bit dot-product instructions), the shortlist an
exact search re-scores, and the little-endian float32 bytes vectors are stored as."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numkong
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from collections.abc import Sequence

Vectors = npt.NDArray[np.float32]
Codes = npt.NDArray[np.int8]

_QUANTISED_ROWS = 16_384  # rows quantised at once (`quantise`): 25 MB of float32 temporaries at 384-d


def dot(buf: Vectors, query: Vectors) -> Vectors:
    """Every row's dot product with the query, on the calling thread.

    `einsum` rather than `@`: numpy's `@` hands a product this size to OpenBLAS, whose worker
    threads then spin after it returns. Measured in hybrid turns at 100k with corpora of 6k and
    15k searched exactly: 30-32 ms of process CPU a turn through `@` against 15-16 through the
    graphs, the same wall time; one product alone takes as long either way (cold cache: 0.44 ms
    at 6k x 384, 0.95 ms at 15k)."""
    out: Vectors = np.einsum("ij,j->i", buf, query)
    return out


def quantise(vectors: Vectors) -> tuple[Codes, Vectors]:
    """Each row as 8-bit integers and its scale: the row is about `codes * scale`, the scale its
    largest magnitude over 127 (1 for a row of zeros), so every component is within half a
    step of its own row's scale. A row holding NaN or infinity gets codes 0 and scale NaN: its
    8-bit products are NaN, which `Exact.search` ranks last.

    In blocks of `_QUANTISED_ROWS`, so the temporaries stay small whatever the matrix."""
    codes: Codes = np.empty(vectors.shape, dtype=np.int8)
    scale: Vectors = np.empty(len(vectors), dtype=np.float32)
    for start in range(0, len(vectors), _QUANTISED_ROWS):
        end = start + _QUANTISED_ROWS
        codes[start:end], scale[start:end] = _quantise_block(vectors[start:end])
    return codes, scale


def _quantise_block(vectors: Vectors) -> tuple[Codes, Vectors]:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        scale = (np.abs(vectors).max(axis=1, initial=0.0) / 127).astype(np.float32)
        finite = np.isfinite(scale)
        scale[(scale == 0) | ~finite] = 1.0  # zeros, or a subnormal peak that underflowed
        steps = np.rint(vectors / scale[:, None])
        np.clip(steps, -127, 127, out=steps)
    steps[~finite] = 0.0  # a NaN or infinite component made its row's scale non-finite
    scale[~finite] = np.nan
    return steps.astype(np.int8), scale


def approx_dot(codes: Codes, scale: Vectors, query: Vectors) -> Vectors:
    """Every row's dot product with the query, from the rows' 8-bit copies (`quantise`).

    One integer product (`numkong`, the processor's 8-bit dot-product instructions, off the
    GIL): a quarter of float32's bytes to stream. Within about 0.003 of the float32 product
    on MiniLM vectors (the dev data's 762 questions against each conversation's turns), which
    is why `Exact.search` re-scores its shortlist from the float32 rows."""
    out = np.empty((1, len(codes)), dtype=np.float32)
    if len(codes):
        q_codes, q_scale = quantise(query[None, :])
        numkong.cdist(q_codes, codes, metric="dot", out=out)  # integer sums, exact in float32 to dim 1,040
        out *= scale
        out *= q_scale[0]
    row: Vectors = out[0]
    return row


def shortlist(k: int) -> int:
    """Rows an exact search ranks by their 8-bit products before re-scoring them from float32:
    twice k, at least k + 16. On the dev data (762 questions, each conversation's turns) the
    8-bit ranking alone kept 0.995 of the float32 top-10, this shortlist re-scored all of it."""
    return max(2 * k, k + 16)


def to_blob(vector: npt.NDArray[Any]) -> bytes:
    """Return a vector as little-endian float32 bytes (how vectors are stored and read)."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_blobs(blobs: Sequence[bytes], dim: int) -> Vectors:
    """Stack stored BLOBs into an (n, dim) float32 matrix."""
    if not blobs:
        return np.empty((0, dim), dtype=np.float32)
    flat = np.frombuffer(b"".join(blobs), dtype="<f4").astype(np.float32, copy=False)
    return flat.reshape(len(blobs), dim)
