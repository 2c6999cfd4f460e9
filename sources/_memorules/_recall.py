"""Memorule recall: the rules visible from a namespace, matched to a session and ranked.

Visibility. Memorules never cross tenants. One whose `applies_to.scope` is `global` or `org`
applies to every project of its tenant; any other (scope `project`, `persona`, or no scope)
applies only to the project it was written in.

Matching a session. `applies_to` ranks; it excludes only on contradiction. A rule is left
out when a key it sets contradicts the session: `persona`, `surface` or `specialization`
set to another value than the session's, or a `scope` the session's level does not see.
`scope` is a level, not an identity: global > org > project > persona, and a rule applies at
its own level and every narrower one — a context at scope `project` sees global, org and
project rules; at `persona` it sees all four; at `global` only global ones. A key the session
does not state contradicts nothing: the rule is kept, and that key counts as no overlap, so
it ranks below rules whose keys the session matches.

Ranking. Qualified memorules (calibrated relevance at or above the floor, and not
contradicting the context) rank by their confidence-weighted score, overlap x confidence
weight — overlap is how many keys of `applies_to` matched a key the context sets, the weights
are `CONFIDENCE_WEIGHTS` (observed 3, inferred 2, asserted 1). A tie on that score goes to the
newer write (`written_at`, then the order the states were committed in), as the seed says.
At a score of 0 no key of the context matched and the score weighs nothing: there the
confidence weight ranks first, then the newer write (so with an empty session context observed
still ranks above inferred above asserted, issue 19). Then relevance, then id.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypedDict, Unpack

import attrs

from broker import RECALL_MIN_SCORE, ConfigError, FieldError, Namespace, SessionContext, count_errors
from sources._entry_recall import EntryRecall
from sources._scoring import Batch, recall_depth, score_rows
from sources._store_reader import QueryCache
from sources._store_view import StoreView
from sources.relevance._relevance import DENSE_MODES, MODES, QueryProfile, check_mode
from sources.relevance._shared_terms import TERM_ODDS, shared_term_logits, sigmoid
from sources.storage import _analysis, _validate
from sources.storage._engine import CORPUS_ENTRIES, Slot
from sources.storage._entries import Recalled, types_errors

from ._state import Current, current
from ._values import CONFIDENCE_WEIGHTS, MAX_TOP_K, SCOPES, SOURCE_TYPES, RecallMatch

if TYPE_CHECKING:
    from broker.abc import Embedder
    from sources.relevance._scorer import Relevance
    from sources.storage._engine import Reader
    from sources.storage._engine_corpora import CurrentRecord

_BREADTH: Final[Mapping[str, int]] = {"persona": 0, "project": 1, "org": 2, "global": 3}
_DEPTH_MIN: Final = 200  # FTS hits scored per namespace, at least: ranking is not by score


def _types(types: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if types is None else tuple(types)


def _context(context: SessionContext | None) -> SessionContext:
    return SessionContext() if context is None else context


class RecallOptions(TypedDict, total=False):
    """`semantic_recall`'s options (see `RecallQuery` for their defaults)."""

    source_type: str
    top_k: int
    context: SessionContext | None
    mode: str | None
    types: Sequence[str] | None


@attrs.frozen(kw_only=True)
class RecallQuery:
    """One recall: the query, where it is asked, what to recall, for which session, how many, how.

    `context` None is an empty one. `embedder` (default: the store's) embeds the query in
    dense modes; sources pass their reader's, which caches the turn's task vector.
    """

    query: str
    namespace: Namespace
    mode: str | None = None
    source_type: str = "memory"
    top_k: int = 10
    context: SessionContext = attrs.field(default=None, converter=_context)
    types: tuple[str, ...] | None = attrs.field(default=None, converter=_types)
    embedder: Embedder | None = attrs.field(default=None, eq=False)
    min_score: float = RECALL_MIN_SCORE
    """The floor a memorule's score must reach (the one floor; `explain` lowers it to 0)."""

    def typed(self, c: Current) -> bool:
        """Whether a memorule is of an asked type (an unclassified one always is)."""
        return self.types is None or c.memory_type is None or c.memory_type in self.types


def context_overlap(applies_to: Mapping[str, str], context: SessionContext) -> int | None:
    """Count a memorule's applies_to keys that match the context; None if one contradicts it.

    A key the context leaves unset matches nothing and contradicts nothing. See the module
    docstring for the rules, `scope` in particular.
    """
    ctx = context.as_dict()
    overlap = 0
    for key, value in applies_to.items():
        want = ctx.get(key)
        if want is None:
            continue
        if key == "scope":
            fits = _BREADTH.get(value, -1) >= _BREADTH[want] if want in _BREADTH else value == want
        else:
            fits = want == value
        if not fits:
            return None
        overlap += 1
    return overlap


def rank_key(overlap: int, confidence: str) -> tuple[int, int]:
    """The leading keys of the memorule ranking (higher first): the confidence-weighted score
    (overlap x weight), then, only where that score is 0, the weight alone."""
    weight = CONFIDENCE_WEIGHTS[confidence]
    score = overlap * weight
    return (score, weight if score == 0 else 0)


@attrs.frozen(kw_only=True)
class _Hit:
    current: Current
    score: float
    qpp: float | None = None
    band: float | None = None


def own_evidence(query: str, subjects: Sequence[str], held: int) -> list[float]:
    """The probability that the task is about each rule, from the terms it shares with the
    rule's subject (its short label: a body of many sentences would share a common word with
    any task), each weighted by its rarity among the subjects of the namespace's `held` rules
    (`shared_term_logits`, as a past task or a graph fact is scored): `subjects` are those of
    every rule the turn read, the others share no term with the task. One shared term never
    clears the floor; two distinctive ones do in a short task ("Deploy the payment fix on
    Friday" and "no friday deploys"). A term of the subject the task does not carry costs one
    bit, as a term of the task the subject does not carry does: a subject stuffed with keywords
    shares two with any task, and must not reach every turn."""
    task = frozenset(_analysis.query_terms(query))
    if not task:
        return [0.0] * len(subjects)
    texts = [frozenset(_analysis.terms(subject)) for subject in subjects]
    logits = shared_term_logits(task, [*texts, *[frozenset()] * max(held - len(subjects), 0)])
    bit = math.log(1.0 / TERM_ODDS)
    return [
        sigmoid(z - bit * len(terms - task)) for z, terms in zip(logits[: len(texts)], texts, strict=True)
    ]


def _own_of(query: str, found: Sequence[Current], matched: Sequence[Current], held: int) -> list[float]:
    """The own evidence of the rules `found`, read among every rule the turn `matched` (before
    the session and type filter: a filtered rule sharing the task's words still makes them
    common) and the namespace's `held` rules."""
    evidence = own_evidence(query, [c.fields.subject for c in matched], held)
    mine = dict(zip((c.rowid for c in matched), evidence, strict=True))
    return [mine[c.rowid] for c in found]


def _hit(c: Current, calibrated: Relevance, own: float) -> _Hit:
    """A rule's hit: the higher of its calibrated score and its own evidence (then without a
    gate or band: the evidence is its own, not the namespace's)."""
    if own > calibrated.score:
        return _Hit(current=c, score=own)
    return _Hit(current=c, score=calibrated.score, qpp=calibrated.qpp, band=calibrated.band)


def _visible_namespaces(conn: Reader, namespace: Namespace) -> tuple[int | None, list[int]]:
    """Return the namespaces whose memorules may apply: (own ns_id, other ns_ids).

    The others are the tenant's other projects that hold any memorule; of those only the
    tenant-wide (global/org) ones count.
    """
    return conn.namespace_id(namespace), conn.memorules.other_namespaces(namespace)


def _query_embedder(store: StoreView, mode: str, embedder: Embedder | None) -> Embedder | None:
    """The embedder of a recall, caching (one query embedding for every namespace probed)."""
    embedder = embedder or store.embedder
    if mode in DENSE_MODES and embedder is None:
        msg = f"recall mode {mode!r} needs an embedder; open the store with one or use mode='lexical'"
        raise ConfigError(msg)
    if embedder is not None and not isinstance(embedder, QueryCache):
        embedder = QueryCache(embedder)
    return embedder


@attrs.define(eq=False)
class _Probe:
    """One recall's query over the namespaces it may see, embedded at most once.

    Every hit is scored against the statistics of the namespace asked in, as every other
    candidate of the turn is (so equal relevance gets an equal score); a namespace that
    holds nothing yet has no statistics, and then a memorule is scored against its own.
    """

    store: StoreView
    conn: Reader
    query: str
    mode: str
    depth: int
    asking: QueryProfile | None
    asking_ns: int | None
    embedder: Embedder | None
    floor: float = RECALL_MIN_SCORE

    @classmethod
    def build(
        cls,
        store: StoreView,
        conn: Reader,
        query: RecallQuery,
        *,
        own_ns: int | None,
        depth: int,
    ) -> _Probe:
        """The probe of `query`, profiled in the namespace asked in (`own_ns`, if it exists)."""
        mode = check_mode(query.mode or store.mode)
        return cls(
            store=store,
            conn=conn,
            query=query.query,
            mode=mode,
            depth=depth,
            asking=None if own_ns is None else store.profile_on(conn, own_ns, query.query),
            asking_ns=own_ns,
            embedder=_query_embedder(store, mode, query.embedder),
            floor=query.min_score,
        )

    def hits(self, ns_id: int, *, foreign: bool, keep: Callable[[Current], bool] | None = None) -> list[_Hit]:
        """Memorules of one namespace sharing a term with the query or, in the namespace asked
        in under a dense mode, among its nearest entries, scored.

        `keep` filters them before scoring (scoring is the Python-heavy part).
        """
        # Most namespaces hold no memorule: an indexed count spares the FTS query (the other
        # projects asked hold some: `other_namespaces` says so).
        held = 0 if foreign else self.conn.memorules.count(ns_id)
        if not foreign and not held:
            return []
        home = self.store.profile_on(self.conn, ns_id, self.query)
        matched = self._matching(ns_id, home, foreign=foreign)
        found = [c for c in matched if keep is None or keep(c)]
        if not found:
            return []
        # Scored in the namespace asked in when it knows the query's terms, else in the home.
        where = self.asking_ns if self.asking is not None and self.asking.present else ns_id
        scores = self._scores(ns_id, where, found)
        own = [0.0] * len(found) if foreign else _own_of(self.query, found, matched, held)
        return [_hit(c, r, mine) for c, r, mine in zip(found, scores, own, strict=True)]

    def _matching(self, ns_id: int, home: QueryProfile, *, foreign: bool) -> list[Current]:
        """The namespace's memorules the FTS matches (only tenant-wide ones if `foreign`), then,
        in the namespace asked in, those among its nearest entries the FTS did not match."""
        rows = []
        if home.present:
            rows = self.conn.memorules.lexical(
                ns_id, sorted(home.present), limit=self.depth, tenant_wide=foreign
            )
        if not foreign:
            matched = {r[0] for r in rows}
            rows += [r for r in self._nearest(ns_id) if r[0] not in matched]
        return list(
            _validate.skip_damaged(rows, Current.from_row, table="memorule_states", row_id=lambda r: r[1])
        )

    def _nearest(self, ns_id: int) -> list[CurrentRecord]:
        """In a dense mode, the namespace's memorules among the entries nearest the query that
        its reference (the turn's shared retrieval) holds: a rule that shares no word with the
        task ("Push the hotfix live" and "Refuse to deploy on a Friday") is still a candidate.
        Nothing under a closed gate: no memorule could clear the floor."""
        if self.mode not in DENSE_MODES or self.embedder is None:
            return []
        scorer = self.store.scorer_on(self.conn, ns_id, self.query, mode=self.mode, embedder=self.embedder)
        if scorer.abstains or scorer.qpp < self.floor:
            return []
        nearest = EntryRecall(self.store, self.conn, ns_id, scorer).nearest(None, scorer.reference.depth)
        return self.conn.memorules.among(ns_id, list(nearest))

    def _scores(self, home: int, ns_id: int | None, found: list[Current]) -> list[Relevance]:
        """Score memorules of namespace `home` on the store's calibrated scale in its mode
        (lexical without an embedder), with the reference of the namespace `ns_id` the query
        was profiled in."""
        if not found:
            return []
        embedder = self.embedder
        mode = "lexical" if embedder is None else self.mode
        scorer = self.store.scorer_on(self.conn, ns_id, self.query, mode=mode, embedder=embedder)
        batch = Batch(
            slot=Slot(home, CORPUS_ENTRIES), rowids=[c.rowid for c in found], texts=[c.text for c in found]
        )
        return score_rows(scorer, self.conn, batch, self.store.vindex)


def recall_memorules_on(store: StoreView, conn: Reader, query: RecallQuery) -> list[RecallMatch]:
    """Recall memorules on a reader connection the caller holds, in ranking order.

    Those visible from the query's namespace, relevant to it (at or above the floor) and not
    contradicting its session context.
    """
    own_ns, others = _visible_namespaces(conn, query.namespace)
    probe = _Probe.build(store, conn, query, own_ns=own_ns, depth=max(10 * query.top_k, _DEPTH_MIN))

    def keep(c: Current) -> bool:
        return query.typed(c) and context_overlap(c.fields.applies_to, query.context) is not None

    hits = [] if own_ns is None else probe.hits(own_ns, foreign=False, keep=keep)
    for ns_id in others:
        hits += probe.hits(ns_id, foreign=True, keep=keep)
    matches = [
        (hit, overlap)
        for hit in hits
        if hit.score >= query.min_score
        and hit.score > 0.0
        and (overlap := context_overlap(hit.current.fields.applies_to, query.context)) is not None
    ]
    matches.sort(key=lambda m: m[0].current.id)
    matches.sort(
        key=lambda m: (
            *rank_key(m[1], m[0].current.fields.confidence),
            m[0].current.written_at,
            m[0].current.state_rowid,
            m[0].score,
        ),
        reverse=True,
    )
    return [_match(hit, overlap) for hit, overlap in matches[: query.top_k]]


def _match(hit: _Hit, overlap: int | None) -> RecallMatch:
    c, f = hit.current, hit.current.fields
    return RecallMatch(
        rowid=c.rowid,
        id=c.id,
        namespace=c.namespace,
        kind="memorule",
        text=c.text,
        score=hit.score,
        qpp=hit.qpp,
        band=hit.band,
        memory_type=c.memory_type,
        created_at=c.created_at,
        memorule_kind=f.memorule_kind,
        applies_to=dict(f.applies_to),
        confidence=f.confidence,
        evidence_signal_id=f.evidence_signal_id,
        written_at=c.written_at,
        overlap=overlap,
        rank_weight=None if overlap is None else rank_key(overlap, f.confidence)[0],
    )


def _recall_errors(asked: RecallQuery) -> list[FieldError]:
    """Every problem with a recall's arguments, in the order of its fields."""
    errors = _validate.text_errors("query", asked.query)
    errors += _validate.choice_errors("mode", asked.mode, MODES, optional=True)
    errors += _validate.choice_errors("source_type", asked.source_type, SOURCE_TYPES, optional=False)
    errors += count_errors("top_k", asked.top_k, maximum=MAX_TOP_K)
    floor: object = asked.min_score  # typed, but a caller may pass anything
    if isinstance(floor, bool) or not isinstance(floor, float | int) or not 0.0 <= floor <= 1.0:
        errors.append(FieldError(field="min_score", code="range", message="must be a number in [0, 1]"))
    context: object = asked.context  # typed, but a caller may pass anything
    if not isinstance(context, SessionContext):
        errors.append(FieldError(field="context", code="type", message="must be a SessionContext"))
    elif context.scope is not None and context.scope not in SCOPES:
        message = f"scope must be one of {', '.join(SCOPES)}"
        errors.append(FieldError(field="context", code="invalid_choice", message=message))
    return errors + ([] if asked.types is None else types_errors(asked.types))


def semantic_recall(
    store: StoreView, query: str, *, namespace: Namespace, **options: Unpack[RecallOptions]
) -> list[RecallMatch]:
    """Recall memories at or above the one calibrated floor.

    Options: `source_type` ("memory", the default, or "memorule"), `top_k` (10), `context`
    (None: an empty one), `mode` (None: the store's) and `types` (None: every type).
    `source_type="memorule"`: memorules only, those not contradicting `context`, in memorule
    ranking order (see the module docstring). `"memory"`: every memory of the namespace
    (memorules included, whatever their applies_to) plus the tenant's global/org memorules of
    other projects, best score first. `types` keeps memories of those types (and unclassified
    memorules), as a turn's typed request does.
    """
    _validate.check_keywords("semantic_recall", options, RecallOptions.__annotations__)
    asked = RecallQuery(query=query, namespace=namespace, **options)
    _validate.raise_if(_recall_errors(asked))
    with store.engine.read() as conn:
        if asked.source_type == "memorule":
            return recall_memorules_on(store, conn, asked)
        return _recall_memory_on(store, conn, asked)


def _recall_memory_on(store: StoreView, conn: Reader, query: RecallQuery) -> list[RecallMatch]:
    """Every memory of the namespace, then the tenant-wide memorules of its other projects."""
    out = _own_memories(store, conn, query)
    own_ns, others = _visible_namespaces(conn, query.namespace)
    probe = _Probe.build(store, conn, query, own_ns=own_ns, depth=recall_depth(query.top_k))
    for ns_id in others:
        out += [
            _match(h, None)
            for h in probe.hits(ns_id, foreign=True, keep=query.typed)
            if h.score >= RECALL_MIN_SCORE
        ]
    out.sort(key=lambda m: (-m.score, m.id))
    return out[: query.top_k]


def _own_memories(store: StoreView, conn: Reader, query: RecallQuery) -> list[RecallMatch]:
    """The store's recall in the namespace, memorules read with their current state."""
    kwargs: dict[str, Any] = {} if query.mode is None else {"mode": query.mode}
    if query.types is not None:
        kwargs["types"] = query.types
    own = store.recall_on(conn, query.query, namespace=query.namespace, limit=query.top_k, **kwargs)

    def matched(r: Recalled) -> RecallMatch:
        m = r.memory
        found = current(conn, query.namespace, m.id) if m.kind == "memorule" else None
        if found is not None:
            return _match(_Hit(current=found, score=r.score, qpp=r.qpp, band=r.band), None)
        return RecallMatch(
            id=m.id,
            namespace=m.namespace,
            kind=m.kind,
            text=m.text,
            score=r.score,
            memory_type=m.memory_type,
            created_at=m.created_at,
        )

    return list(_validate.skip_damaged(own, matched, table="memorule_states", row_id=lambda r: r.memory.id))
