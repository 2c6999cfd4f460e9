"""The namespaces' text indexes in memory: BM25 over numpy postings instead of an FTS query.

Each namespace's indexed documents (every corpus, `Reader.indexed_documents`) are read once,
when the store warms, into postings: for each term, the documents holding it and how often. A turn's lexical
retrieval (`sources.relevance._reference.lexical_hits`) then scores the task's terms over those arrays,
about ten times faster than FTS5 ranking the same matches at 100k documents.

The score is FTS5's `bm25()` (k1 1.2, b 0.75; IDF `log((N - n + 0.5) / (n + 0.5))`, 1e-6 when
not positive; N, n and the mean length over the namespace's documents; each term's part added
in the query's term order), so the matches and their ranks are those of the FTS query, ties
ordered by rowid (tests compare both).

Every write of a namespace's text appends to the engine's change log in its transaction
(`Reader.text_changes`; SQLite: `text_log`, `sources.storage._sqlite._schema._v5`); an index reads the
log's new rows before it answers and applies them (a document's current terms are read from the
engine, `Reader.indexed_terms`), so it answers for every committed write, of any process. An
index that fell behind the log's kept rows, or was never built (a store used without `warm`),
answers None and the caller runs the FTS query: the same matches, slower.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Final, TypeAlias

import attrs
import numpy as np
import numpy.typing as npt

from broker.log import get_logger

from ._doc_terms import PackedTerms, gather
from ._engine import CORPORA, CORPUS_ENTRIES

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence


logger = get_logger(__name__)

K1: Final = 1.2
B: Final = 0.75
_CORPORA: Final = len(CORPORA)  # entries, facts, knowledge (fts rowid & 3)
_DENSE_SUM_RATIO: Final = 8
"""A query's matches are summed over every slot when they number at least 1/8 of the slots,
else sorted: measured on 2 cores, a sort of N/32 matches costs 1.5 ms at N = 1M against 3.6 ms
for the pass over every slot, N/10 about the same (5 ms), N/3 22 ms against 8 ms."""
_ENTRIES: Final = CORPUS_ENTRIES
STRIDE: Final = 4
"""A document's key: rowid * 4 + corpus, the corpus in the low two bits."""
_COMPACT_MIN: Final = 4096  # removed documents kept before `warm` builds an index again


_Part = tuple["npt.NDArray[np.int32]", "npt.NDArray[np.int32]", "npt.NDArray[np.float32]"]


_Scored: TypeAlias = tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.float64]]
"""A query's live matches: their slots, FTS rowids and BM25 scores (`Postings._scored`)."""


@attrs.frozen(eq=False)
class _Forward:
    """The terms of a run of slots from `first`: slot `first + i`'s are
    `ids[offsets[i]:offsets[i + 1]]`, ids of `Postings.word_id`."""

    first: int
    offsets: npt.NDArray[np.int64]
    ids: npt.NDArray[np.int32]


@attrs.define(eq=False)
class Postings:
    """One namespace's index: document slots (FTS rowid, length, alive) and, per term, the
    slots holding it with their term frequencies. Not thread-safe: `TextIndex` locks."""

    log_id: int
    rowids: npt.NDArray[np.int64] = attrs.field(factory=lambda: np.zeros(0, dtype=np.int64))
    lengths: npt.NDArray[np.float64] = attrs.field(factory=lambda: np.zeros(0, dtype=np.float64))
    alive: npt.NDArray[np.bool_] = attrs.field(factory=lambda: np.zeros(0, dtype=bool))
    slot_of: dict[int, int] = attrs.field(factory=dict)
    terms: dict[str, tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]] = attrs.field(factory=dict)
    n_live: int = 0
    total_len: int = 0
    df: dict[str, int] = attrs.field(factory=dict)
    """Per term, the live documents holding it (FTS5's `doc` count of the term)."""
    word_id: dict[str, int] = attrs.field(factory=dict)
    _words: npt.NDArray[np.object_] = attrs.field(factory=lambda: np.empty(0, dtype=object))
    """The terms by id (`word_id`), with spare room at the end: one gather reads many."""
    _segments: list[_Forward] = attrs.field(factory=list)
    _firsts: list[int] = attrs.field(factory=list)
    tags: npt.NDArray[np.int16] = attrs.field(factory=lambda: np.zeros(0, dtype=np.int16))
    """Per slot, its entry's memory type (`type_code`; 0: unclassified; -1: not known)."""
    type_code: dict[str, int] = attrs.field(factory=dict)
    types_read: bool = False
    """Whether every entry's type was read once (`TextIndex.learn_types`)."""
    _changes: int = attrs.field(default=0, init=False)
    """Bumped by every `add` and `remove`: what `_scored` keeps is of one state of the index."""
    _last_scored: tuple[tuple[str, ...], int, _Scored | None] | None = attrs.field(default=None, init=False)
    """The last query `_scored` answered, at which `_changes`, and its answer: a turn's sources
    ask the same query again (the shared retrieval's `top`, then a typed lane's `top_typed`)."""

    def set_types(self, types: dict[int, str | None]) -> None:
        """Record the memory types of some entries (by entry rowid) held by the index."""
        if len(self.tags) < len(self.rowids):
            self.tags = np.concatenate([self.tags, np.full(len(self.rowids) - len(self.tags), -1, np.int16)])
        for rowid, memory_type in types.items():
            slot = self.slot_of.get(rowid * STRIDE + _ENTRIES)
            if slot is not None:
                code = (
                    0
                    if memory_type is None
                    else self.type_code.setdefault(memory_type, len(self.type_code) + 1)
                )
                self.tags[slot] = code

    @classmethod
    def build(cls, chunks: Iterable[Sequence[tuple[int, str]]], log_id: int) -> Postings:
        """Index chunks of (FTS rowid, analysed body) rows; postings are merged once at the end."""
        index = cls(log_id=log_id)
        index.add(*chunks)
        return index

    def add(self, *chunks: Sequence[tuple[int, str]]) -> None:
        """Index documents (a rowid already indexed is replaced), a chunk at a time so only one
        chunk's tokens are ever held as Python strings."""
        self._changes += 1
        vocab: dict[str, int] = {}
        parts, forwards = [], []
        for rows in chunks:
            self.remove(r for r, _ in rows if r in self.slot_of)
            if rows:
                first = len(self.rowids)
                part, ids, lengths = self._chunk(rows, vocab)
                parts.append(part)
                forwards.append((first, ids, lengths))
        if parts:
            self._merge(vocab, parts)
            self._forward(vocab, forwards)

    def indexed_terms(self, rowid: int) -> tuple[str, ...]:
        """A live document's indexed terms, in order (its analysed body, split)."""
        return tuple(self._slot_terms([self.slot_of[rowid]])[0])

    def terms_of(self, rowids: Sequence[int]) -> PackedTerms:
        """`indexed_terms` of many live documents at once, as ids of this index's words."""
        return self._slot_terms([self.slot_of[r] for r in rowids])

    def _slot_terms(self, slots: Sequence[int]) -> PackedTerms:
        """The terms of document slots, with the words: one gather of ids per segment they are
        in, the documents spans of the gathers (so a kept answer holds these ids, never a
        whole segment's)."""
        where = np.asarray(slots, dtype=np.int64)
        which = np.searchsorted(self._firsts, where, side="right") - 1
        starts, ends = np.zeros(len(where), dtype=np.int64), np.zeros(len(where), dtype=np.int64)
        gathered: list[npt.NDArray[np.int32]] = []
        base = 0
        for seg_no in np.unique(which).tolist():
            picked = np.flatnonzero(which == seg_no)
            segment = self._segments[seg_no]
            at = where[picked] - segment.first
            first, last = segment.offsets[at], segment.offsets[at + 1]
            seg_ends = np.cumsum(last - first)
            gathered.append(gather(segment.ids, first, last))
            starts[picked], ends[picked] = base + seg_ends - (last - first), base + seg_ends
            base += int(seg_ends[-1])
        ids = np.concatenate(gathered) if gathered else np.zeros(0, dtype=np.int32)
        return PackedTerms.spans(ids, starts, ends, self._words, self.word_id)

    def _forward(
        self, vocab: dict[str, int], forwards: list[tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]]]
    ) -> None:
        """Keep each document's terms in order, as ids of `word_id` (the answer's indexed terms
        without a read): one segment per chunk, the chunk's ids mapped to the global ids."""
        new = [term for term in vocab if term not in self.word_id]
        start = len(self.word_id)
        if start + len(new) > len(self._words):  # grow by doubling: a catch-up adds a few
            grown = np.empty(max(2 * len(self._words), start + len(new), 1024), dtype=object)
            grown[:start] = self._words[:start]
            self._words = grown
        for i, term in enumerate(new, start=start):
            self.word_id[term] = i
            self._words[i] = term
        to_global = np.fromiter(map(self.word_id.__getitem__, vocab), np.int32, len(vocab))
        for first, ids, lengths in forwards:
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            self._segments.append(_Forward(first, offsets, to_global[ids]))
        self._firsts = [segment.first for segment in self._segments]

    def _chunk(
        self, rows: Sequence[tuple[int, str]], vocab: dict[str, int]
    ) -> tuple[_Part, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Give a chunk's documents their slots; return its postings as (term id, slot, term
        frequency), by term then slot, growing `vocab`; and its tokens' term ids in order with
        each document's length."""
        first = len(self.rowids)
        split = [body.split() for _, body in rows]
        lengths = np.fromiter(map(len, split), np.int64, len(split))
        for slot, (rowid, _) in enumerate(rows, start=first):
            self.slot_of[rowid] = slot
        self.rowids = np.concatenate([self.rowids, np.fromiter((r for r, _ in rows), np.int64, len(rows))])
        self.lengths = np.concatenate([self.lengths, lengths.astype(np.float64)])
        self.alive = np.concatenate([self.alive, np.ones(len(rows), dtype=bool)])
        self.n_live += len(rows)
        self.total_len += int(lengths.sum())
        tokens = list(itertools.chain.from_iterable(split))
        for term in set(tokens).difference(vocab):
            vocab[term] = len(vocab)
        ids = np.fromiter(map(vocab.__getitem__, tokens), np.int64, len(tokens))
        n = len(rows)
        keys, counts = np.unique(
            ids * n + np.repeat(np.arange(n, dtype=np.int64), lengths), return_counts=True
        )
        slots = (keys % n + first).astype(np.int32)
        return ((keys // n).astype(np.int32), slots, counts.astype(np.float32)), ids, lengths

    def _merge(
        self,
        vocab: dict[str, int],
        parts: list[_Part],
    ) -> None:
        """Append the chunks' postings to each term's, slots ascending within a term.

        A counting sort: each chunk (by term then slot) is scattered to its terms' places and
        dropped, so indexing needs about the final arrays' memory, not a sort's several copies.
        """
        n_terms = len(vocab)
        counts = [np.bincount(part[0], minlength=n_terms) for part in parts]
        bounds = np.concatenate([[0], np.cumsum(np.sum(counts, axis=0))])
        cursor = bounds[:-1].copy()
        slots = np.empty(int(bounds[-1]), dtype=np.int32)
        tf = np.empty(int(bounds[-1]), dtype=np.float32)
        for count in counts:
            terms, chunk_slots, chunk_tf = parts.pop(0)
            first_of_term = np.cumsum(count) - count  # where each term starts in the chunk
            dest = cursor[terms] + (np.arange(len(terms)) - first_of_term[terms])
            slots[dest], tf[dest] = chunk_slots, chunk_tf
            cursor += count
        for term, t in vocab.items():
            self.df[term] = self.df.get(term, 0) + int(bounds[t + 1] - bounds[t])
            new_slots, new_tf = slots[bounds[t] : bounds[t + 1]], tf[bounds[t] : bounds[t + 1]]
            old = self.terms.get(term)
            if old is not None:
                new_slots, new_tf = np.concatenate([old[0], new_slots]), np.concatenate([old[1], new_tf])
            self.terms[term] = (new_slots, new_tf)

    @property
    def mostly_dead(self) -> bool:
        """Removed documents (whose postings stay) outnumber the live ones, and are many."""
        dead = len(self.rowids) - self.n_live
        return dead > max(self.n_live, _COMPACT_MIN)

    def remove(self, fts_rowids: Iterable[int]) -> None:
        """Forget documents (unknown rowids are ignored); their slots stay, marked dead."""
        slots = [slot for rowid in list(fts_rowids) if (slot := self.slot_of.pop(rowid, None)) is not None]
        self._changes += 1
        for slot, terms in zip(slots, self._slot_terms(slots), strict=True):
            self.alive[slot] = False
            self.n_live -= 1
            self.total_len -= int(self.lengths[slot])
            for term in set(terms):
                self.df[term] -= 1

    def top(
        self, qterms: Sequence[str], depth: int, corpora: Sequence[int] = tuple(range(_CORPORA))
    ) -> tuple[tuple[tuple[int, float], ...], ...]:
        """Each of `corpora`'s best `depth` matches of any of `qterms` (in the order of
        `corpora`), best first, as (FTS rowid, rank)."""
        scored = self._scored(qterms)
        if scored is None:
            return tuple(() for _ in corpora)
        _, rowids, scores = scored
        return tuple(_best(rowids, scores, corpus, depth) for corpus in corpora)

    def top_typed(
        self, qterms: Sequence[str], depth: int, types: Sequence[str]
    ) -> tuple[tuple[int, float], ...] | None:
        """The entries' best `depth` matches whose memory type is in `types` or unclassified,
        as `top`; None when a match's type is not known (`set_types`)."""
        scored = self._scored(qterms)
        if scored is None:
            return ()
        found, rowids, scores = scored
        entries = np.flatnonzero((rowids & 3) == _ENTRIES)
        if len(self.tags) < len(self.rowids):
            return None
        tags = self.tags[found[entries]]
        if (tags < 0).any():
            return None
        allowed = [0, *(self.type_code[t] for t in types if t in self.type_code)]
        kept = entries[np.isin(tags, allowed)]
        return _best(rowids[kept], scores[kept], _ENTRIES, depth)

    def _scored(self, qterms: Sequence[str]) -> _Scored | None:
        """Every live match of any of `qterms`: (slots, FTS rowids, BM25 scores), None if none;
        the last answer again while the query and the index are the same."""
        key = tuple(qterms)
        last = self._last_scored
        if last is not None and last[0] == key and last[1] == self._changes:
            return last[2]
        scored = self._score(qterms)
        self._last_scored = (key, self._changes, scored)
        return scored

    def _score(self, qterms: Sequence[str]) -> _Scored | None:
        if self.n_live == 0:
            return None
        slots, parts = self._contributions(qterms)
        if not slots:
            return None
        matched, weights = np.concatenate(slots), np.concatenate(parts)
        # bincount adds each slot's parts in input order: the query's term order, as FTS5 does.
        if len(matched) * _DENSE_SUM_RATIO >= len(self.rowids):
            # Many matches: one sum over every slot, no sort (a part is never 0: tf >= 1, idf > 0).
            summed = np.bincount(matched, weights=weights, minlength=len(self.rowids))
            found = np.flatnonzero(summed).astype(np.int32)
            return found, self.rowids[found], summed[found].astype(np.float64)
        found, where = np.unique(matched, return_inverse=True)
        scores = np.bincount(where, weights=weights).astype(np.float64)
        return found, self.rowids[found], scores

    def _contributions(
        self, qterms: Sequence[str]
    ) -> tuple[list[npt.NDArray[np.int32]], list[npt.NDArray[np.float64]]]:
        """Per query term (in order): the live slots holding it and its BM25 part in each."""
        n, avgdl, lengths = self.n_live, self.total_len / self.n_live, self.lengths
        slots, parts = [], []
        for term in qterms:
            posting = self.terms.get(term)
            if posting is None:
                continue
            live = self.alive[posting[0]]
            docs, tf = posting[0][live], posting[1][live].astype(np.float64)
            if len(docs) == 0:
                continue
            idf = math.log((n - len(docs) + 0.5) / (len(docs) + 0.5))
            idf = idf if idf > 0.0 else 1e-6
            slots.append(docs)
            parts.append(idf * (tf * (K1 + 1.0)) / (tf + K1 * (1 - B + B * lengths[docs] / avgdl)))
        return slots, parts


def _best(
    rowids: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], corpus: int, depth: int
) -> tuple[tuple[int, float], ...]:
    """One corpus's best `depth` of the scored matches: (FTS rowid, rank), ties by rowid."""
    mine = np.flatnonzero((rowids & 3) == corpus)
    if len(mine) > depth > 0:  # keep the best `depth` and every match tied with the last of them
        worst_kept = -np.partition(-scores[mine], depth - 1)[depth - 1]
        mine = mine[scores[mine] >= worst_kept]
    order = mine[np.lexsort((rowids[mine], -scores[mine]))][:depth]
    return tuple((int(rowids[i]), -float(scores[i])) for i in order)
