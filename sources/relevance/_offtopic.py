"""How close a task is to the tasks no memory serves: one of the QPP gate's features.

`sources/data/offtopic.txt` holds off-topic tasks of our own writing — small talk,
acknowledgements, arithmetic, general knowledge, generic requests. A task's closeness to them
(its best cosine with any of them) tells the gate what the namespace's evidence cannot: "what
time is it?" looks like something nobody's memory answers, even in a small store whose best
match for it is as close as a real question's best match is.

The tasks are embedded once per process and embedding model (about half a second, when the
store opens: `MemoryStore.open` warms it, never inside a turn). A task identical to one of
them is as close as can be. Only the fit, which asks these very tasks, compares a task with
the others (`leave_self_out`), so it sees what an unseen off-topic task would get.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from importlib.resources import files
from typing import TYPE_CHECKING, Final

import attrs
import numpy as np

from sources.storage import _analysis

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    import numpy.typing as npt

    from broker.abc import Embedder

RESOURCE: Final = "offtopic.txt"
_lock = threading.Lock()
_leave_self_out = threading.local()


@contextlib.contextmanager
def leave_self_out() -> Iterator[None]:
    """Within this block (in this thread) a task is compared with the off-topic tasks other than
    itself: for the fit, which asks those very tasks."""
    _leave_self_out.on = True
    try:
        yield
    finally:
        _leave_self_out.on = False


def _excluded(task: str) -> str | None:
    return _key(task) if getattr(_leave_self_out, "on", False) else None


_matrices: dict[tuple[str, int], tuple[tuple[str, ...], npt.NDArray[np.float32]]] = {}
"""The off-topic tasks' vectors by (model id, dimension): two models claiming one id but not
one dimension (a misconfigured one) never read each other's."""


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def tasks() -> tuple[str, ...]:
    """The off-topic tasks shipped with the package."""
    raw = files("sources").joinpath("data", RESOURCE).read_text(encoding="utf-8")
    return tuple(line.strip() for line in raw.splitlines() if line.strip() and not line.startswith("#"))


def warm(embedder: Embedder) -> None:
    """Embed the off-topic tasks for this embedder's model, once per process."""
    _matrix(embedder)


def _matrix(embedder: Embedder) -> tuple[tuple[str, ...], npt.NDArray[np.float32]]:
    with _lock:
        key = (embedder.model_id, embedder.dim)
        found = _matrices.get(key)
        if found is None:
            texts = tasks()
            found = (tuple(_key(t) for t in texts), np.asarray(embedder.embed(list(texts)), dtype=np.float32))
            _matrices[key] = found
        return found


@attrs.frozen(eq=False)
class _TermSets:
    """The off-topic tasks' informative term sets, as an inverted index: for each term, the
    sets holding it; each set's size and task key."""

    holding: dict[str, npt.NDArray[np.intp]]
    sizes: npt.NDArray[np.float64]
    keys: tuple[str, ...]


@functools.cache
def _term_sets() -> _TermSets:
    sets = [(_key(t), frozenset(_analysis.terms(t))) for t in tasks()]
    sets = [(k, terms) for k, terms in sets if terms]
    holding: dict[str, list[int]] = {}
    for i, (_, terms) in enumerate(sets):
        for term in terms:
            holding.setdefault(term, []).append(i)
    return _TermSets(
        holding={term: np.asarray(ids, dtype=np.intp) for term, ids in holding.items()},
        sizes=np.asarray([len(terms) for _, terms in sets], dtype=np.float64),
        keys=tuple(k for k, _ in sets),
    )


def lexical_closeness(task: str, terms: Iterable[str]) -> float:
    """Without vectors (lexical mode): the task's best Jaccard overlap of informative terms with
    an off-topic task other than itself."""
    own, mine = _excluded(task), frozenset(terms)
    index = _term_sets()
    found = [index.holding[t] for t in mine if t in index.holding]
    if not found:
        return 0.0
    shared = np.bincount(np.concatenate(found), minlength=len(index.keys)).astype(np.float64)
    jaccard = shared / (len(mine) + index.sizes - shared)
    if own is not None:
        jaccard[[i for i, k in enumerate(index.keys) if k == own]] = 0.0
    return float(jaccard.max())


def closeness(embedder: Embedder, task: str, query_vector: npt.NDArray[np.float32]) -> float:
    """The task's best cosine with an off-topic task other than itself."""
    keys, matrix = _matrix(embedder)
    cosines = matrix @ np.asarray(query_vector, dtype=np.float32)
    own = _excluded(task)
    if own is None:
        return float(cosines.max())
    mask = np.fromiter((k != own for k in keys), dtype=np.bool_, count=len(keys))
    return float(cosines[mask].max()) if mask.any() else 0.0
