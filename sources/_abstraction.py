"""Abstraction: facts, as sentences or subject-predicate-object triples, and their source.

A fact is indexed in its namespace's text index (corpus 1), so it shares the term
statistics of the namespace's entries and is scored exactly as an entry with the same text.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from broker import FieldError, Namespace

from ._doc_tables import DocTable, delete_doc_by_id, insert_docs
from ._source_base import CorpusSource
from .storage import _validate
from .storage._engine import CORPUS_FACTS

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from ._store import MemoryStore

FACT_TYPE = "semantic"
"""The memory type of every fact."""
MAX_PART_CHARS = 2_000
"""Longest subject, predicate or object accepted, in characters."""
_TABLE = "facts"


@attrs.frozen(kw_only=True)
class NewFact:
    """One fact to write: a sentence (`text`), or a triple rendered as one, or both."""

    text: str | None = None
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    id: str | None = None
    created_at: str | None = None
    metadata: Mapping[str, Any] | None = None

    def rendered(self) -> str | None:
        """Return the text stored and scored: `text`, else "subject predicate object."."""
        if self.text is not None:
            return self.text
        if self.subject is None or self.predicate is None or self.object is None:
            return None
        sentence = f"{self.subject.strip()} {self.predicate.strip()} {self.object.strip()}"
        return sentence if sentence.endswith((".", "!", "?")) else sentence + "."


def _checked(fact: NewFact, prefix: str) -> tuple[dict[str, Any] | None, list[FieldError]]:
    errors = _validate.id_errors(f"{prefix}id", fact.id)
    parts = {"subject": fact.subject, "predicate": fact.predicate, "object": fact.object}
    for name, value in parts.items():
        if value is not None:
            errors += _validate.text_errors(f"{prefix}{name}", value, max_chars=MAX_PART_CHARS)
        elif fact.text is None:
            msg = "required without text (give a sentence or a whole triple)"
            errors.append(FieldError(field=f"{prefix}{name}", code="missing", message=msg))
    if fact.text is not None:
        errors += _validate.text_errors(f"{prefix}text", fact.text)
    created, errs = _validate.normalise_created_at(fact.created_at)
    metadata, more = _validate.encode_metadata(fact.metadata)
    errors += [attrs.evolve(e, field=f"{prefix}{e.field}") for e in errs + more]
    text = fact.rendered()
    if errors or text is None:
        return None, errors
    row = {
        "id": fact.id or str(uuid.uuid4()),
        **parts,
        "text": text,
        "created_at": created,
        "metadata": metadata,
    }
    return row, []


def fact_errors(fact: NewFact) -> list[FieldError]:
    """Every problem `FactWriter.add_facts` would refuse this fact for (whether its id exists
    apart); nothing is read or written. For checking a file before writing any of it."""
    return _checked(fact, "")[1]


@attrs.define(eq=False)
class FactWriter:
    """Writes and deletes the facts of one store (blocking; run it in a worker thread)."""

    _store: MemoryStore

    def add_fact(  # noqa: PLR0913 - the documented keyword API
        self,
        text: str | None = None,
        *,
        namespace: Namespace,
        subject: str | None = None,
        predicate: str | None = None,
        object: str | None = None,  # noqa: A002 - the documented API name
        id: str | None = None,  # noqa: A002
        created_at: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> str:
        """Write one fact (a sentence, or a triple rendered as one); return its id."""
        fact = NewFact(
            text=text,
            subject=subject,
            predicate=predicate,
            object=object,
            id=id,
            created_at=created_at,
            metadata=metadata,
        )
        return self.add_facts([fact], namespace=namespace, replace=replace)[0]

    def add_facts(
        self, facts: Iterable[NewFact], *, namespace: Namespace, replace: bool = False
    ) -> list[str]:
        """Write many facts in one transaction, all or nothing; return their ids.

        ValidationError (every field error, nothing written) on bad input, a repeated id, or
        an existing id without `replace`.
        """
        rows = _validated(_validate.batch_of(facts, NewFact, namespace))
        insert_docs(self._store, namespace, DocTable(_TABLE, CORPUS_FACTS), rows, replace=replace)
        return [str(r["id"]) for r in rows]

    def delete_fact(self, id: str, *, namespace: Namespace) -> bool:  # noqa: A002
        """Remove a fact from the index and statistics; return whether it existed."""
        return delete_doc_by_id(self._store, namespace, id, table=_TABLE)


def _validated(facts: list[NewFact]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, fact in enumerate(facts):
        prefix = f"[{i}]." if len(facts) > 1 else ""
        row, errs = _checked(fact, prefix)
        errors += errs
        if row is not None:
            if row["id"] in seen:
                msg = f"id {row['id']!r} repeats in this batch"
                errors.append(FieldError(field=f"{prefix}id", code="duplicate", message=msg))
            seen.add(row["id"])
            rows.append(row)
    _validate.raise_if(errors)
    return rows


@attrs.define(eq=False)
class AbstractionSource(CorpusSource):
    """Facts matching the task (FTS, corpus 1), scored on the one calibrated scale."""

    name: ClassVar[str] = "abstraction"
    table: ClassVar[str] = _TABLE
    corpus: ClassVar[int] = CORPUS_FACTS
    memory_type: ClassVar[str | None] = FACT_TYPE
    id_prefix: ClassVar[str] = "fact:"
    extra_cols: ClassVar[tuple[str, ...]] = ("subject", "predicate", "object")

    def _metadata(self, row: Sequence[Any]) -> dict[str, Any]:
        spo = {
            k: v for k, v in zip(("subject", "predicate", "object"), row[5:8], strict=True) if v is not None
        }
        return {**super()._metadata(row), **spo}
