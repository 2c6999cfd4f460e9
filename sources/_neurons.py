"""Neurons: associative memories that fire when the task mentions their trigger phrases.

A neuron is an entry of kind `neuron`, stamped `associative` by its writer. The analysed
terms of its trigger phrases go to `neuron_triggers (ns_id, term, entry_rowid)` (once per
neuron) in the same transaction, and the text indexed for the neuron is its text plus its
trigger phrases, so the namespace's term statistics see the triggers too. The source scans
that index with the task's terms and scores each neuron on the one calibrated scale, as the
document "its text, plus the trigger terms the text lacks": triggers widen what a neuron is
about without repeating what the text already says (the calibrated model reads repetition
as a longer, less focused text), and a neuron whose triggers are all in its text scores
exactly as the store scores that text. Importance is stored and shown, never scored, so it
alone never injects a neuron.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from broker import Candidate, FieldError, Namespace, ValidationError

from . import _analysis, _index, _validate
from ._engine import CORPUS_ENTRIES, Slot
from ._entries import EntryRow
from ._source_base import Batch, BestRows, ReaderSource, recall_depth, score_rows

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from broker.abc import SourceRequest

    from ._engine import Reader, Writer
    from ._engine_corpora import NeuronRecord
    from ._scorer import Relevance
    from ._store import MemoryStore

NEURON_TYPE = "associative"
"""The memory type every neuron is stamped with."""
MAX_TRIGGERS = 64
"""Trigger phrases one neuron may have."""
MAX_TRIGGER_CHARS = 500
"""Longest trigger phrase accepted, in characters."""


@attrs.frozen(kw_only=True)
class _NeuronRow:
    id: str
    text: str
    created_at: str
    importance: float
    metadata: str
    triggers: tuple[str, ...]
    trigger_terms: tuple[str, ...]


@attrs.define(eq=False)
class NeuronWriter:
    """Writes and deletes neurons of one store (blocking; run it in a worker thread)."""

    _store: MemoryStore

    def add_neuron(  # noqa: PLR0913 - the documented keyword API
        self,
        text: str,
        *,
        namespace: Namespace,
        triggers: Sequence[str],
        importance: float = 0.5,
        id: str | None = None,  # noqa: A002 - the documented API name
        created_at: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> str:
        """Write one neuron and its triggers in one transaction; return its id.

        ValidationError (every field error, nothing written) on bad input, or when the id
        exists and `replace` is false.
        """
        given = _Given(
            text=text,
            triggers=triggers,
            importance=importance,
            id=id,
            created_at=created_at,
            metadata=metadata,
        )
        row = _checked(given)
        vector = None
        if self._store.embedder is not None:  # embed before taking the write lock
            vector = self._store.embedder.embed([row.text])
        with self._store.engine.write() as conn:
            self._write(conn, namespace, row, vector, replace=replace)
        return row.id

    def _write(
        self,
        conn: Writer,
        namespace: Namespace,
        row: _NeuronRow,
        vector: npt.NDArray[np.float32] | None,
        *,
        replace: bool,
    ) -> None:
        """Insert (or with `replace`, replace) the neuron and its vector in the caller's write."""
        ns_id = conn.ensure_namespace(namespace)
        old = conn.entries.find(ns_id, row.id)
        if old is not None:
            if not replace:
                raise ValidationError.single("id", "exists", f"id {row.id!r} already exists in {namespace}")
            conn.entries.delete(ns_id, old[0])
        rowid = _insert(conn, ns_id, namespace, row)
        if vector is not None and self._store.embedder is not None:
            conn.store_vectors(Slot(ns_id, CORPUS_ENTRIES), [rowid], vector, self._store.embedder.model_id)

    def delete_neuron(self, id: str, *, namespace: Namespace) -> bool:  # noqa: A002
        """Remove a neuron (its triggers, index terms and vector); return whether it existed."""
        with self._store.engine.write() as conn:
            ns_id = conn.namespace_id(namespace)
            found = None if ns_id is None else conn.neurons.find(ns_id, id)
            if ns_id is None or found is None:
                return False
            conn.entries.delete(ns_id, found)
        return True


@attrs.frozen(kw_only=True)
class _Given:
    """`add_neuron`'s fields as the caller gave them, before any check."""

    text: object
    triggers: object
    importance: object
    id: object
    created_at: object
    metadata: object


def _checked(given: _Given) -> _NeuronRow:
    """The neuron's row, or ValidationError with every field's error."""
    text, importance, id_ = given.text, given.importance, given.id
    errors = _validate.text_errors("text", text)
    errors += _validate.id_errors("id", id_)
    errors += _validate.importance_errors(importance)
    created, errs = _validate.normalise_created_at(given.created_at)
    errors += errs
    encoded, errs = _validate.encode_metadata(given.metadata)
    errors += errs
    phrases, terms, errs = _checked_triggers(given.triggers)
    errors += errs
    _validate.raise_if(errors)
    assert isinstance(text, str)  # noqa: S101 - narrowed by the checks above
    assert isinstance(importance, int | float)  # noqa: S101
    return _NeuronRow(
        id=str(id_) if id_ is not None else str(uuid.uuid4()),
        text=text,
        created_at=str(created),
        importance=float(importance),
        metadata=encoded,
        triggers=phrases,
        trigger_terms=terms,
    )


def _checked_triggers(triggers: object) -> tuple[tuple[str, ...], tuple[str, ...], list[FieldError]]:
    """Validate trigger phrases; return (phrases, their analysed terms in order, errors)."""
    if isinstance(triggers, str) or not isinstance(triggers, Sequence):
        return (), (), [FieldError(field="triggers", code="type", message="must be a list of phrases")]
    if not 1 <= len(triggers) <= MAX_TRIGGERS:
        msg = f"must hold 1..{MAX_TRIGGERS} phrases"
        return (), (), [FieldError(field="triggers", code="out_of_range", message=msg)]
    errors: list[FieldError] = []
    terms: list[str] = []
    for i, phrase in enumerate(triggers):
        errs = _validate.text_errors(f"triggers[{i}]", phrase, max_chars=MAX_TRIGGER_CHARS)
        if not errs and not _analysis.terms(phrase):
            msg = "has no informative word (only stop words or punctuation)"
            errs = [FieldError(field=f"triggers[{i}]", code="no_terms", message=msg)]
        errors += errs
        if not errs:
            terms += _analysis.terms(phrase)
    return tuple(triggers), tuple(dict.fromkeys(terms)), errors


def _insert(conn: Writer, ns_id: int, ns: Namespace, row: _NeuronRow) -> int:
    """Insert the entry as MemoryStore does, index text + triggers, and record the triggers."""
    entry = EntryRow(
        id=row.id,
        kind="neuron",
        memory_type=NEURON_TYPE,
        text=row.text,
        created_at=row.created_at,
        importance=row.importance,
        metadata=row.metadata,
    )
    rowid = conn.entries.insert(ns_id, ns, entry)
    _index.add_doc(conn, ns_id, CORPUS_ENTRIES, rowid, "\n".join((row.text, *row.triggers)))
    conn.neurons.add_triggers(ns_id, rowid, row.trigger_terms)
    return rowid


@attrs.define(eq=False)
class NeuronSource(ReaderSource):
    """Neurons whose trigger terms occur in the task, scored on the one calibrated scale.

    The trigger scan reads the `(ns_id, term)` index; the neurons sharing the most IDF mass
    with the task are scored on their text and trigger phrases. No importance fallback.
    """

    name: ClassVar[str] = "neurons"

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        ns_id = conn.namespace_id(request.namespace)
        if ns_id is None:
            return []
        prof = self._reader.store.profile_on(conn, ns_id, request.task)
        if not prof.terms:
            return []
        top = _scan(conn, ns_id, prof.idf, recall_depth(request.limit))
        rows = _neurons(conn, ns_id, top, request.types)
        if not rows:
            return []
        triggers: dict[int, list[str]] = defaultdict(list)
        for rowid, term in conn.neurons.triggers(ns_id, top):
            triggers[rowid].append(term)
        scorer = self._reader.scorer(conn, ns_id, request.task, request.mode)
        rowids = [int(r[0]) for r in rows]
        batch = Batch(
            slot=Slot(ns_id, CORPUS_ENTRIES),
            rowids=rowids,
            texts=[r[3] for r in rows],
            terms=[_doc_terms(r[3], triggers[rid]) for r, rid in zip(rows, rowids, strict=True)],
        )
        scores = score_rows(scorer, conn, batch, self._reader.store.vindex)
        matched = set(prof.terms)
        best = BestRows(entry_id=lambda row: str(row[1]), table="entries", limit=request.limit)
        return best.candidates(
            zip(rows, scores, strict=True),
            lambda rs: _candidate(self.name, *rs, sorted(matched.intersection(triggers[int(rs[0][0])]))),
        )


def _doc_terms(text: str, trigger_terms: list[str]) -> list[str]:
    """Return the terms a neuron is scored on: its text's, then trigger terms the text lacks."""
    own = _analysis.terms(text)
    have = set(own)
    return own + sorted({t for t in trigger_terms if t not in have})


def _scan(conn: Reader, ns_id: int, idf: Mapping[str, float], depth: int) -> list[int]:
    """Rowids of the neurons whose triggers share the most IDF mass with the task."""
    mass: dict[int, float] = defaultdict(float)
    for rowid, term in conn.neurons.matching(ns_id, list(idf)):
        mass[rowid] += idf[term]
    ranked = sorted(mass, key=lambda r: (-mass[r], r))
    return ranked[:depth]


def _neurons(conn: Reader, ns_id: int, rowids: list[int], types: Sequence[str] | None) -> list[NeuronRecord]:
    return conn.neurons.rows(ns_id, rowids, types)


def _candidate(source: str, row: Sequence[Any], rel: Relevance, matched: list[str]) -> Candidate:
    return Candidate(
        entry_id=row[1],
        source=source,
        score=rel.score,
        qpp=rel.qpp,
        band=rel.band,
        text=row[3],
        block="memory",
        memory_type=row[2],
        created_at=row[4],
        metadata={
            "kind": "neuron",
            "importance": float(row[5]),
            "matched_triggers": matched,
            "metadata": _validate.decode_metadata(row[6]),
        },
    )
