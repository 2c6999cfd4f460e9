"""Recall of the entries: candidates from the turn's shared retrieval (or the store's own
search), scored on the one calibrated scale in the request's mode (`MemoryStore.recall`)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Unpack

import attrs

from broker import RECALL_MIN_SCORE, count_errors

from ._scoring import clearing, recall_depth, shared_or_searched
from .relevance import _turn_context
from .relevance._relevance import DENSE_MODES, check_mode
from .storage import _analysis, _validate
from .storage._engine import CORPUS_ENTRIES, Slot
from .storage._entries import MAX_RECALL_LIMIT, Memory, Recalled, RecallOptions, types_errors

if TYPE_CHECKING:
    from collections.abc import Sequence

    from broker import Namespace
    from broker.abc import Embedder

    from ._store_view import StoreView
    from .relevance._relevance import QueryProfile
    from .relevance._scorer import Relevance, Scorer
    from .storage._engine import Reader


def recall_on(
    store: StoreView,
    conn: Reader,
    query: str,
    *,
    namespace: Namespace,
    embedder: Embedder | None = None,
    **options: Unpack[RecallOptions],
) -> list[Recalled]:
    """Run `recall` on a reader connection the caller holds (so it can interrupt it).

    `embedder` may be a caching wrapper of the store's own (sources share one per turn).
    """
    _validate.check_keywords("recall", options, RecallOptions.__annotations__)
    asked = options.get("mode")
    mode = check_mode(store.mode if asked is None else asked)
    types, limit = options.get("types"), options.get("limit", 10)
    check_recall_args(query, types, limit)
    if mode in DENSE_MODES:
        store.require_embedder(f"recall mode {mode!r}")
    ns_id = conn.namespace_id(namespace)
    prof = store.profile_on(conn, ns_id, query)
    if ns_id is None or not prof.terms or (mode == "lexical" and not prof.present):
        return []
    scorer = store.scorer_on(conn, ns_id, query, mode=mode, embedder=embedder)
    floor = options.get("min_score", RECALL_MIN_SCORE)
    if scorer.abstains or scorer.qpp < floor:
        # A score is qpp x band with band <= 1: below the floor's gate no memory can clear it,
        # so no candidate is read or scored (most turns of a trivial or foreign task).
        return []
    scored = EntryRecall(store, conn, ns_id, scorer).scored(types, limit, floor)
    kept = [(p, r) for p, r in scored if p.score >= floor and p.score > 0.0]
    kept.sort(key=lambda pr: (-pr[0].score, pr[1][1]))
    recalled = _validate.skip_damaged(kept, _recalled, table="entries", row_id=lambda pr: pr[1][1])
    return list(itertools.islice(recalled, limit))


@attrs.frozen
class EntryRecall:
    """One recall's where and how: the store, the reader connection, the namespace and the
    scorer of the query (with the namespace's reference: the turn's shared retrieval)."""

    store: StoreView
    conn: Reader
    ns_id: int
    scorer: Scorer

    def scored(
        self, types: Sequence[str] | None, limit: int, floor: float = 0.0
    ) -> list[tuple[Relevance, Any]]:
        """The namespace's candidates for the query, scored in the scorer's mode; those under
        `floor` may be left out (in lexical mode their rows are never read)."""
        k = recall_depth(limit)
        if self.scorer.mode == "lexical":
            return self._lexical_scored(types, k, floor)
        # hybrid unions two lists: half as deep each keeps the pool the same size
        return self._dense_scored(types, k if self.scorer.mode == "dense" else max(2 * limit, 50), floor)

    def _lexical_scored(
        self, types: Sequence[str] | None, k: int, floor: float
    ) -> list[tuple[Relevance, Any]]:
        """The lexical top `k` scored from their indexed terms, then the rows of those at or
        above `floor` read: most of a turn's candidates never clear it, and reading a row costs
        more than scoring it."""
        keyed = self._lexical_terms(types, k)
        if keyed is None:
            top = self._lexical_top(types, k)
            rels = self.scorer.relevances_at([_row_terms(r) for r in top])
            return _turn_context.rows_in_context(list(zip(rels, top, strict=True)), floor)
        rowids, rels = self._in_context(*keyed, floor)
        kept = clearing(rowids, rels, floor)
        rows = {int(row[0]): row for row in rows_by_rowid(self.conn, self.ns_id, list(kept))}
        return [(rel, rows[r]) for r, rel in kept.items() if r in rows]

    def _lexical_terms(
        self, types: Sequence[str] | None, k: int
    ) -> tuple[list[int], Sequence[Sequence[str]]] | None:
        """The entries' best `k` matches (rowids, best first) with their indexed terms, without
        reading a row: untyped from the turn's shared retrieval, typed from the store's
        in-memory index; None when only rows can tell (no current index)."""
        if types is None:
            hits = shared_or_searched(self.conn, self.ns_id, self.scorer, corpus=CORPUS_ENTRIES, depth=k)
            return hits.rowids.tolist(), hits.terms
        picked = self._typed_best(types, k)
        if picked is None:
            return None
        held = self.store.texts.indexed_terms(self.conn, self.ns_id, [(CORPUS_ENTRIES, r) for r in picked])
        if held is None:
            return None
        rowids = [r for r in picked if (CORPUS_ENTRIES, r) in held]
        return rowids, [held[(CORPUS_ENTRIES, r)] for r in rowids]

    def _dense_scored(self, types: Sequence[str] | None, k: int, floor: float) -> list[tuple[Relevance, Any]]:
        """Score the dense top-k (and in hybrid the lexical top-k) with the mode's logistic.

        Candidates come from the namespace only, within the typed filter.
        """
        scorer, conn, ns_id = self.scorer, self.conn, self.ns_id
        cosine = self.nearest(types, k)
        rows = {int(r[0]): r for r in rows_by_rowid(conn, ns_id, list(cosine))}
        if scorer.mode == "hybrid" and scorer.profile.present:
            for r in self._lexical_top(types, k):
                rows.setdefault(int(r[0]), r)
            cosine.update(self._stored_cosines([r for r in rows if r not in cosine]))
        # Rows without a cosine (stale or missing vectors) are embedded now, so the score stays right.
        order = [r for r in cosine if r in rows] + [r for r in rows if r not in cosine]
        rels = scorer.relevances_given(
            [_row_terms(rows[r]) for r in order], [rows[r][6] for r in order], [cosine.get(r) for r in order]
        )
        return _turn_context.rows_in_context([(p, rows[r]) for r, p in zip(order, rels, strict=True)], floor)

    def _in_context(
        self, rowids: list[int], terms: Sequence[Sequence[str]], floor: float
    ) -> tuple[list[int], list[Relevance]]:
        """The lexical candidates' relevances re-ranked with the turns' neighbours
        (`sources.relevance._turn_context`), before their rows are read (one query tells which are turns
        and which of those ask); as scored when none clears `floor` (the re-ranking hands out
        the same scores, so it would keep none either)."""
        rels = self.scorer.relevances_at(terms)
        if not any(rel.score >= floor and rel.score > 0.0 for rel in rels):
            return rowids, rels
        turns = self.conn.entries.episodic_turns(self.ns_id, rowids)
        episodic = [r in turns for r in rowids]
        ranked = _turn_context.in_context(
            rels, rowids, episodic, [turns.get(r, False) for r in rowids], floor
        )
        return [rowids[i] for i, _ in ranked], [rel for _, rel in ranked]

    def _lexical_top(self, types: Sequence[str] | None, k: int) -> list[Any]:
        """The entries' best `k` matches with their columns and analysed bodies: untyped, from
        the turn's shared retrieval (the scorer's reference) when it went that deep; typed, read
        down the store's in-memory ranking (or one typed FTS query without a current index)."""
        conn, ns_id, scorer = self.conn, self.ns_id, self.scorer
        if types is None:
            hits = shared_or_searched(conn, ns_id, scorer, corpus=CORPUS_ENTRIES, depth=k)
            return rows_by_rowid(conn, ns_id, hits.rowids.tolist())
        picked = self._typed_best(types, k)
        if picked is None:
            return lexical_rows(conn, ns_id, scorer.profile, types, k)
        by_rowid = {int(r[0]): r for r in rows_by_rowid(conn, ns_id, picked)}
        return [by_rowid[r] for r in picked if r in by_rowid]

    def _typed_best(self, types: Sequence[str], k: int) -> list[int] | None:
        """The entries' first `k` matches whose type is one of `types` or none (what a typed FTS
        query keeps): from the store's in-memory index, which knows the entries' types; else
        read down its ranking, four times deeper each time it runs out; None without a
        current index."""
        qterms, depth, seen = sorted(self.scorer.profile.present), max(4 * k, 256), 0
        typed = self.store.texts.ranked_typed(self.conn, self.ns_id, qterms, types, k)
        if typed is not None:  # the index knows every match's type
            return [r >> 2 for r, _ in typed]
        picked: list[int] = []
        while True:
            ranked = self.store.texts.ranked(self.conn, self.ns_id, qterms, CORPUS_ENTRIES, depth)
            if ranked is None:
                return None
            fresh = [r >> 2 for r, _ in ranked[seen:]]
            picked += _of_types(self.conn, self.ns_id, fresh, types)[: k - len(picked)]
            if len(picked) >= k or len(ranked) < depth:
                return picked
            seen, depth = len(ranked), 4 * depth

    def nearest(self, types: Sequence[str] | None, k: int) -> dict[int, float]:
        """The entries' `k` nearest vectors (rowid -> cosine, best first): the turn's shared
        retrieval when untyped (and deep enough), else a search; empty without vectors."""
        vindex, query = self.store.vindex, self.scorer.query_vector
        if query is None or vindex is None:
            return {}
        shared = None if types is not None else self.scorer.reference.nearest(CORPUS_ENTRIES, k)
        if shared is not None:
            return shared.cosine_of()
        found = vindex.search(self.conn, Slot(self.ns_id, CORPUS_ENTRIES), query, k, types=types)
        return {h.rowid: h.cosine for h in found}

    def _stored_cosines(self, rowids: list[int]) -> dict[int, float]:
        vindex, query = self.store.vindex, self.scorer.query_vector
        if vindex is None or query is None or not rowids:
            return {}
        return vindex.cosines(self.conn, Slot(self.ns_id, CORPUS_ENTRIES), rowids, query)


def rows_by_rowid(conn: Reader, ns_id: int, rowids: list[int]) -> list[Any]:
    """The namespace's entry rows with their indexed terms, by rowid (`EntryReads.rows`)."""
    return list(conn.entries.rows(ns_id, rowids))


def check_recall_args(query: object, types: Sequence[str] | None, limit: object) -> None:
    errors = _validate.text_errors("query", query)
    errors += types_errors(types)
    errors += count_errors("limit", limit, maximum=MAX_RECALL_LIMIT)
    _validate.raise_if(errors)


def _of_types(conn: Reader, ns_id: int, rowids: list[int], types: Sequence[str]) -> list[int]:
    """The entry rowids (in their order) whose type is one of `types` or none."""
    allowed = conn.entries.typed(ns_id, rowids, types)
    return [r for r in rowids if r in allowed]


def lexical_rows(
    conn: Reader, ns_id: int, prof: QueryProfile, types: Sequence[str] | None, k: int
) -> list[Any]:
    """The entries' best `k` lexical candidates of a typed query, with their indexed terms."""
    return list(conn.entries.lexical(ns_id, sorted(prof.present), types=types, limit=k))


def _recalled(scored: tuple[Relevance, Sequence[Any]]) -> Recalled:
    rel, row = scored
    return Recalled(
        memory=Memory.from_row(row),
        score=rel.score,
        qpp=rel.qpp,
        band=rel.band,
        rowid=int(row[0]),
        own_score=rel.own,
    )


def _row_terms(row: Sequence[Any]) -> Sequence[str]:
    """Return a candidate row's terms: its indexed terms when read with them, else analysed now."""
    terms: Sequence[str] | None = row[10] if len(row) > 10 else None
    return terms if terms is not None else _analysis.terms(row[6])
