"""Consolidated knowledge: summaries with the ids of the memories they were made from.

Indexed in the namespace's text index (corpus 2) and scored like every other memory: there
is no flat-score shortcut, so a summary competes under the same floor as the rest.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from broker import FieldError, Namespace

from ._doc_tables import DocTable, delete_doc_by_id, insert_docs
from ._source_base import CorpusSource
from .storage import _validate
from .storage._engine import CORPUS_KNOWLEDGE

if TYPE_CHECKING:
    from ._store import MemoryStore

MAX_PROVENANCE = 10_000
"""Provenance ids one knowledge item may carry."""
_TABLE = "knowledge"


@attrs.define(eq=False)
class KnowledgeWriter:
    """Writes and deletes the consolidated knowledge of one store (blocking)."""

    _store: MemoryStore

    def add_knowledge(  # noqa: PLR0913 - the documented keyword API
        self,
        text: str,
        *,
        namespace: Namespace,
        provenance: Sequence[str],
        id: str | None = None,  # noqa: A002 - the documented API name
        created_at: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> str:
        """Write one knowledge item with the ids it was made from; return its id.

        ValidationError (every field error, nothing written) on bad input, an empty or
        malformed provenance, or an existing id without `replace`.
        """
        _validate.raise_if(
            knowledge_errors(
                text=text, provenance=provenance, id=id, created_at=created_at, metadata=metadata
            )
        )
        created, _ = _validate.normalise_created_at(created_at)  # checked just above
        encoded, _ = _validate.encode_metadata(metadata)
        row = {
            "id": id or str(uuid.uuid4()),
            "text": text,
            "provenance": json.dumps(list(provenance), ensure_ascii=False),
            "created_at": created,
            "metadata": encoded,
        }
        insert_docs(self._store, namespace, DocTable(_TABLE, CORPUS_KNOWLEDGE), [row], replace=replace)
        return str(row["id"])

    def delete_knowledge(self, id: str, *, namespace: Namespace) -> bool:  # noqa: A002
        """Remove a knowledge item from the index and statistics; return whether it existed."""
        return delete_doc_by_id(self._store, namespace, id, table=_TABLE)


def knowledge_errors(
    *,
    text: object,
    provenance: object,
    id: object = None,  # noqa: A002 - the documented API name
    created_at: object = None,
    metadata: object = None,
) -> list[FieldError]:
    """Every problem `KnowledgeWriter.add_knowledge` would refuse these fields for (whether the
    id exists apart); nothing is read or written."""
    errors = _validate.text_errors("text", text)
    errors += _validate.id_errors("id", id)
    errors += _provenance_errors(provenance)
    errors += _validate.normalise_created_at(created_at)[1]
    errors += _validate.encode_metadata(metadata)[1]
    return errors


def _provenance_errors(provenance: object) -> list[FieldError]:
    if isinstance(provenance, str) or not isinstance(provenance, Sequence):
        return [FieldError(field="provenance", code="type", message="must be a list of memory ids")]
    if not 1 <= len(provenance) <= MAX_PROVENANCE:
        msg = f"must hold 1..{MAX_PROVENANCE} memory ids"
        return [FieldError(field="provenance", code="out_of_range", message=msg)]
    errors: list[FieldError] = []
    for i, pid in enumerate(provenance):
        if pid is None:
            errors.append(FieldError(field=f"provenance[{i}]", code="invalid_id", message="must be an id"))
        errors += _validate.id_errors(f"provenance[{i}]", pid)
    return errors


@attrs.define(eq=False)
class ConsolidatedSource(CorpusSource):
    """Knowledge items matching the task (FTS, corpus 2), scored on the one calibrated scale.

    They are unclassified (memory type None), so typed requests see them too.
    """

    name: ClassVar[str] = "consolidated"
    table: ClassVar[str] = _TABLE
    corpus: ClassVar[int] = CORPUS_KNOWLEDGE
    block: ClassVar[str] = "consolidated"
    memory_type: ClassVar[str | None] = None
    id_prefix: ClassVar[str] = "knowledge:"
    extra_cols: ClassVar[tuple[str, ...]] = ("provenance",)

    def _metadata(self, row: Sequence[Any]) -> dict[str, Any]:
        provenance = _validate.decode_json(row[5], column="provenance", default="[]")
        return {**super()._metadata(row), "provenance": provenance}
