"""Neurons: associative memories that fire when the task shares a word with their trigger phrases.

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
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from broker import Candidate, FieldError, Namespace

from ._doc_tables import embedded
from ._scoring import Batch, BestRows, recall_depth, score_rows
from ._source_base import ReaderSource
from .storage import _analysis, _index, _validate
from .storage._engine import CORPUS_ENTRIES, Slot
from .storage._entries import EntryRow
from .storage._entry_writes import clear_ids

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from broker.abc import SourceRequest

    from ._store import MemoryStore
    from .relevance._scorer import Relevance
    from .storage._engine import Reader, Writer
    from .storage._engine_corpora import NeuronRecord

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


@attrs.frozen(kw_only=True)
class NewNeuron:
    """One neuron to write (`NeuronWriter.add_neurons`): its text and its trigger phrases."""

    text: str
    triggers: Sequence[str]
    importance: float = 0.5
    id: str | None = None
    created_at: str | None = None
    metadata: Mapping[str, Any] | None = None


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
        neuron = NewNeuron(
            text=text,
            triggers=triggers,
            importance=importance,
            id=id,
            created_at=created_at,
            metadata=metadata,
        )
        return self.add_neurons([neuron], namespace=namespace, replace=replace)[0]

    def add_neurons(
        self, neurons: Iterable[NewNeuron], *, namespace: Namespace, replace: bool = False
    ) -> list[str]:
        """Write many neurons and their triggers in one transaction, all or nothing; return
        their ids in order.

        ValidationError (every field error, nothing written) on bad input, an id repeated in
        the batch, or an id that exists when `replace` is false.
        """
        rows = _checked_all(_validate.batch_of(neurons, NewNeuron, namespace))
        if not rows:  # no write, no namespace created
            return []
        vectors = embedded(self._store, [row.text for row in rows])  # before the write lock
        with self._store.engine.write() as conn:
            self._write(conn, namespace, rows, vectors, replace=replace)
        return [row.id for row in rows]

    def _write(
        self,
        conn: Writer,
        namespace: Namespace,
        rows: list[_NeuronRow],
        vectors: npt.NDArray[np.float32] | None,
        *,
        replace: bool,
    ) -> None:
        """Insert (or with `replace`, replace) the neurons and their vectors in the caller's write."""
        ns_id = conn.ensure_namespace(namespace)
        clear_ids(conn, ns_id, namespace, [row.id for row in rows], replace=replace)
        rowids = _insert(conn, ns_id, namespace, rows)
        if vectors is not None and self._store.embedder is not None:
            conn.store_vectors(Slot(ns_id, CORPUS_ENTRIES), rowids, vectors, self._store.embedder.model_id)

    def delete_neuron(self, id: str, *, namespace: Namespace) -> bool:  # noqa: A002
        """Remove a neuron (its triggers, index terms and vector); return whether it existed."""
        with self._store.engine.write() as conn:
            ns_id = conn.namespace_id(namespace)
            found = None if ns_id is None else conn.neurons.find(ns_id, id)
            if ns_id is None or found is None:
                return False
            conn.entries.delete(ns_id, found)
        return True


def neuron_errors(neuron: NewNeuron) -> list[FieldError]:
    """Every problem `NeuronWriter.add_neurons` would refuse this neuron for (whether its id
    exists apart); nothing is read or written."""
    return _checked(neuron)[1]


def _checked_all(neurons: list[NewNeuron]) -> list[_NeuronRow]:
    """Every neuron's row, or ValidationError with every field's error (fields `[i].name`
    when there are several)."""
    rows: list[_NeuronRow] = []
    errors: list[FieldError] = []
    seen: set[str] = set()
    many = len(neurons) > 1
    for i, neuron in enumerate(neurons):
        prefix = f"[{i}]." if many else ""
        row, errs = _checked(neuron, prefix)
        errors += errs
        if row is not None and row.id in seen:
            errors.append(
                FieldError(
                    field=f"{prefix}id", code="duplicate", message=f"id {row.id!r} repeats in this batch"
                )
            )
        if row is not None:
            seen.add(row.id)
            rows.append(row)
    _validate.raise_if(errors)
    return rows


def _checked(given: NewNeuron, prefix: str = "") -> tuple[_NeuronRow | None, list[FieldError]]:
    """The neuron's row, or None and every field's error."""
    text, importance, id_ = given.text, given.importance, given.id
    errors = _validate.text_errors(f"{prefix}text", text)
    errors += _validate.id_errors(f"{prefix}id", id_)
    created, errs = _validate.normalise_created_at(given.created_at)
    encoded, more = _validate.encode_metadata(given.metadata)
    errors += _validate.prefixed([*_validate.importance_errors(importance), *errs, *more], prefix)
    phrases, terms, errs = _checked_triggers(given.triggers, prefix)
    errors += errs
    if errors:
        return None, errors
    return (
        _NeuronRow(
            id=str(id_) if id_ is not None else str(uuid.uuid4()),
            text=text,
            created_at=str(created),
            importance=float(importance),
            metadata=encoded,
            triggers=phrases,
            trigger_terms=terms,
        ),
        [],
    )


def _checked_triggers(
    triggers: object, prefix: str = ""
) -> tuple[tuple[str, ...], tuple[str, ...], list[FieldError]]:
    """Validate trigger phrases; return (phrases, their analysed terms in order, errors)."""
    field = f"{prefix}triggers"
    if isinstance(triggers, str) or not isinstance(triggers, Sequence):
        return (), (), [FieldError(field=field, code="type", message="must be a list of phrases")]
    if not 1 <= len(triggers) <= MAX_TRIGGERS:
        msg = f"must hold 1..{MAX_TRIGGERS} phrases"
        return (), (), [FieldError(field=field, code="out_of_range", message=msg)]
    errors: list[FieldError] = []
    terms: list[str] = []
    for i, phrase in enumerate(triggers):
        errs = _validate.text_errors(f"{field}[{i}]", phrase, max_chars=MAX_TRIGGER_CHARS)
        if not errs and not _analysis.terms(phrase):
            msg = "has no informative word (only stop words or punctuation)"
            errs = [FieldError(field=f"{field}[{i}]", code="no_terms", message=msg)]
        errors += errs
        if not errs:
            terms += _analysis.terms(phrase)
    return tuple(triggers), tuple(dict.fromkeys(terms)), errors


def _insert(conn: Writer, ns_id: int, ns: Namespace, rows: list[_NeuronRow]) -> list[int]:
    """Insert the entries as MemoryStore does, index text + triggers, and record the triggers."""
    entries = [
        EntryRow(
            id=row.id,
            kind="neuron",
            memory_type=NEURON_TYPE,
            text=row.text,
            created_at=row.created_at,
            importance=row.importance,
            metadata=row.metadata,
        )
        for row in rows
    ]
    rowids = conn.entries.insert_many(ns_id, ns, entries)
    indexed = ("\n".join((row.text, *row.triggers)) for row in rows)
    _index.add_docs(conn, ns_id, CORPUS_ENTRIES, zip(rowids, indexed, strict=True))
    for rowid, row in zip(rowids, rows, strict=True):
        conn.neurons.add_triggers(ns_id, rowid, row.trigger_terms)
    return rowids


@attrs.define(eq=False)
class NeuronSource(ReaderSource):
    """Neurons whose trigger terms occur in the task, scored on the one calibrated scale.

    The trigger scan reads the `(ns_id, term)` index; the neurons sharing the most IDF mass
    with the task are scored on their text and trigger phrases. No importance fallback.
    """

    name: ClassVar[str] = "neurons"
    gated: ClassVar[bool] = True

    def _fetch_on(self, conn: Reader, *, request: SourceRequest) -> list[Candidate]:
        ns_id = conn.namespace_id(request.namespace)
        if ns_id is None:
            return []
        prof = self._reader.store.profile_on(conn, ns_id, request.task)
        if not prof.terms:
            return []
        scorer = self._reader.scorer(conn, ns_id, request.task, request.mode)
        if self._gate_closed(scorer):  # no neuron can reach the floor: no trigger is scanned
            return []
        top = _scan(conn, ns_id, prof.idf, recall_depth(request.limit))
        rows = _neurons(conn, ns_id, top, request.types)
        if not rows:
            return []
        triggers: dict[int, list[str]] = defaultdict(list)
        for rowid, term in conn.neurons.triggers(ns_id, top):
            triggers[rowid].append(term)
        rowids = [int(r[0]) for r in rows]
        batch = Batch(
            slot=Slot(ns_id, CORPUS_ENTRIES),
            rowids=rowids,
            texts=[r[3] for r in rows],
            terms=[_doc_terms(r[3], triggers[rid]) for r, rid in zip(rows, rowids, strict=True)],
        )
        scores = score_rows(scorer, conn, batch, self._reader.store.vindex)
        matched = set(prof.terms)
        best = BestRows(
            entry_id=lambda row: str(row[1]), table="entries", limit=request.limit, floor=self.min_score
        )
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
        retrieval_key=(CORPUS_ENTRIES, int(row[0])),
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
