"""A store's text indexes in memory (`TextIndex`): one `Postings` a namespace, built when the
store warms and kept current from the engine's change log before each answer (see
`sources.storage._postings`); None where only the FTS query can answer."""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Final

import attrs
import numpy as np

from broker.log import get_logger

from ._engine import CORPUS_ENTRIES
from ._postings import STRIDE, Postings
from ._runs import LexicalRun

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._engine import Reader

logger = get_logger(__name__)

_CHUNK: Final = 50_000  # documents tokenised at a time while indexing
_CATCH_UP: Final = 1000  # logged changes a turn applies before it answers (more: FTS this turn)


@attrs.define(eq=False)
class TextIndex:
    """The in-memory text indexes of a store's namespaces, kept current from `text_log`."""

    _indexes: dict[int, Postings] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _behind: set[int] = attrs.field(factory=set)

    def warm(self, conn: Reader, ns_id: int) -> None:
        """Build the index of one namespace (about a second at 100k documents), or bring it up
        to date: every logged change applied, and built again once removed documents outnumber
        the live ones (their postings stay until then)."""
        with self._lock:
            index = self._indexes.get(ns_id)
            if index is not None and not index.mostly_dead and self._caught_up(conn, ns_id, index, None):
                return
            newest = conn.text_log_bounds()[1]
            chunks = (
                [(_code(*key), body) for key, body in docs]
                for docs in conn.indexed_documents(ns_id, chunk=_CHUNK)
            )
            self._indexes[ns_id] = Postings.build(chunks, newest)
            self._behind.discard(ns_id)

    def top(
        self, conn: Reader, ns_id: int, qterms: Sequence[str], depth: int
    ) -> tuple[LexicalRun, ...] | None:
        """Each corpus's best `depth` matches with their indexed terms, or None without a
        current index (the caller then runs the FTS query)."""
        with self._lock:
            index = self._current(conn, ns_id)
            if index is None:
                return None
            found = index.top(qterms, depth)
            codes = np.fromiter((code for hits in found for code, _ in hits), np.int64)
            ranks = np.fromiter((rank for hits in found for _, rank in hits), np.float64)
            terms = index.terms_of(codes.tolist())
            ends = np.cumsum([len(hits) for hits in found]).tolist()
            return tuple(
                LexicalRun(rowids=codes[a:b] // STRIDE, ranks=ranks[a:b], terms=terms[a:b])
                for a, b in itertools.pairwise([0, *ends])
            )

    def indexed_terms(
        self, conn: Reader, ns_id: int, keys: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], Sequence[str]] | None:
        """`Reader.indexed_terms` of some documents (corpus, rowid) from the index, or None
        without a current index."""
        with self._lock:
            index = self._current(conn, ns_id)
            if index is None:
                return None
            held = [(key, code) for key in keys if (code := _code(*key)) in index.slot_of]
            terms = index.terms_of([code for _, code in held])
            return dict(zip((key for key, _ in held), terms, strict=True))

    def document_frequencies(self, conn: Reader, ns_id: int, terms: Sequence[str]) -> dict[str, int] | None:
        """The live documents holding each term (those with any), as the engine's term statistics
        count them; None without an index current at this read's snapshot (the caller then
        reads the engine's): an index already ahead of the snapshot answers None too, so a
        profile never mixes the snapshot's document count with later writes' frequencies."""
        with self._lock:
            index = self._current(conn, ns_id)
            if index is None:
                return None
            if index.log_id > conn.text_log_bounds()[1]:
                return None
            return {t: n for t in terms if (n := index.df.get(t, 0)) > 0}

    def ranked(
        self, conn: Reader, ns_id: int, qterms: Sequence[str], corpus: int, depth: int
    ) -> tuple[tuple[int, float], ...] | None:
        """One corpus's best `depth` matches (FTS rowid, rank), or None without a current index.
        For filters the index does not know (a memory's type): the caller reads down the list,
        asking deeper when it runs out."""
        with self._lock:
            index = self._current(conn, ns_id)
            if index is None:
                return None
            return index.top(qterms, depth, (corpus,))[0]

    def learn_types(self, conn: Reader, ns_id: int) -> None:
        """Read the memory type of every entry of a built index that does not know them yet.

        `MemoryStore.warm` calls it in a read of its own after building: a damaged entries
        table then fails that read alone, and typed searches read the engine instead."""
        with self._lock:
            index = self._indexes.get(ns_id)
            if index is not None and not index.types_read:
                index.set_types(conn.entries.memory_types(ns_id, None))
                index.types_read = True

    def ranked_typed(
        self, conn: Reader, ns_id: int, qterms: Sequence[str], types: Sequence[str], depth: int
    ) -> tuple[tuple[int, float], ...] | None:
        """The entries' best `depth` matches (FTS rowid, rank) whose memory type is in `types` or
        unclassified; None without a current index or with a match of unknown type."""
        with self._lock:
            index = self._current(conn, ns_id)
            return None if index is None else index.top_typed(qterms, depth, types)

    def _current(self, conn: Reader, ns_id: int) -> Postings | None:
        """The namespace's index brought up to the read's log (a batch of changes at most), or
        None when there is none or changes remain; the caller holds the lock."""
        index = self._indexes.get(ns_id)
        if index is None or not self._caught_up(conn, ns_id, index, _CATCH_UP):
            return None
        return index

    def invalidate(self) -> None:
        """Forget every index (a rebuild of the FTS tables); `warm` builds them again."""
        with self._lock:
            self._indexes.clear()

    def _caught_up(self, conn: Reader, ns_id: int, index: Postings, batch: int | None) -> bool:
        """Apply the log's new rows of the namespace, at most `batch` of them (None: all).

        False while changes remain (a turn then runs the FTS query and the next applies the
        next batch: a bulk write is absorbed a batch a turn, never all inside one deadline) or
        when the index fell behind the kept log (`warm` builds it again).
        """
        oldest, newest = conn.text_log_bounds()
        if newest <= index.log_id:
            return True
        if oldest > index.log_id + 1:
            if ns_id not in self._behind:
                self._behind.add(ns_id)
                logger.warning("store.text_index.behind", ns_id=ns_id, hint="warm builds it again")
            return False
        changes = conn.text_changes(ns_id, index.log_id, limit=batch)
        _apply(conn, ns_id, index, {_code(c.corpus, c.rowid): c.op for c in changes})
        if batch is not None and len(changes) == batch:
            index.log_id = changes[-1].change_id
            return False
        index.log_id = max([newest, *(c.change_id for c in changes)])
        return True


def _code(corpus: int, rowid: int) -> int:
    """A document's slot key in the postings: its rowid and corpus in one integer."""
    return rowid * STRIDE + corpus


def _bodies(conn: Reader, ns_id: int, codes: list[int]) -> dict[int, str]:
    """The indexed terms (joined by spaces) of some documents of the namespace, by slot key."""
    found = conn.indexed_terms(ns_id, [(c % STRIDE, c // STRIDE) for c in codes])
    return {_code(*key): " ".join(terms) for key, terms in found.items()}


def _apply(conn: Reader, ns_id: int, index: Postings, last_op: dict[int, int]) -> None:
    """Bring the index to each changed document's current state (its last op; its body now)."""
    index.remove(r for r, op in last_op.items() if op < 0)
    wanted = [r for r, op in last_op.items() if op > 0]
    bodies = _bodies(conn, ns_id, wanted)
    index.remove(r for r in wanted if r not in bodies)  # removed again since it was logged
    added = [r for r in wanted if r in bodies]
    index.add([(r, bodies[r]) for r in added])
    entries = [r // STRIDE for r in added if r % STRIDE == CORPUS_ENTRIES]
    if entries:
        index.set_types(conn.entries.memory_types(ns_id, entries))


__all__ = ["Postings", "TextIndex"]
