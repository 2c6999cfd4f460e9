"""Memorules: typed behavioural records with audited writes and context-ranked recall.

A memorule is a rule, feedback, preference, correction or convention: validated on write,
written with an audit event in the same transaction, versioned, and recalled ranked by how
well it fits the session asking. It is an `entries` row of kind "memorule" whose text is its
subject and body, so it is indexed in its namespace's FTS like any memory and scored on the
one calibrated scale.

The package, one concern a module:

- `_values`: the constants and frozen values (`WriterSession`, `MemoruleState`,
  `AuditEvent`, `RecallMatch`, the fields of a state).
- `_checks`: the rules of each field and of the writer (`memorule_errors`, `session_errors`).
- `_writes`: create (through `sources.remember`, the one write front), update and delete,
  each with its audit event in one transaction.
- `_state`: reading what writes recorded: the current state, `memorule_history`,
  `audit_events`.
- `_recall`: visibility, matching a session, ranking; `semantic_recall`.
- `_source`: `MemorulesSource`, which hands the ranking to the turn as `Candidate.rank`.
"""

from __future__ import annotations

from ._checks import field_errors as field_errors
from ._checks import fields_errors as fields_errors
from ._checks import memorule_errors as memorule_errors
from ._checks import session_errors as session_errors
from ._recall import RecallQuery as RecallQuery
from ._recall import context_overlap as context_overlap
from ._recall import rank_key as rank_key
from ._recall import recall_memorules_on as recall_memorules_on
from ._recall import semantic_recall as semantic_recall
from ._source import MemorulesSource as MemorulesSource
from ._state import audit_events as audit_events
from ._state import memorule_history as memorule_history
from ._values import APPLIES_TO_KEYS as APPLIES_TO_KEYS
from ._values import CONFIDENCE_LEVELS as CONFIDENCE_LEVELS
from ._values import CONFIDENCE_WEIGHTS as CONFIDENCE_WEIGHTS
from ._values import DEFAULT_CONFIDENCE as DEFAULT_CONFIDENCE
from ._values import FIELD_NAMES as FIELD_NAMES
from ._values import MEMORULE_KINDS as MEMORULE_KINDS
from ._values import SCOPES as SCOPES
from ._values import SOURCE_TYPES as SOURCE_TYPES
from ._values import AuditEvent as AuditEvent
from ._values import MemoruleFields as MemoruleFields
from ._values import MemoruleState as MemoruleState
from ._values import NewMemorule as NewMemorule
from ._values import RecallMatch as RecallMatch
from ._values import WriterSession as WriterSession
from ._writes import create_memorule as create_memorule
from ._writes import delete_memorule as delete_memorule
from ._writes import update_memorule as update_memorule

__all__ = [
    "APPLIES_TO_KEYS",
    "CONFIDENCE_LEVELS",
    "CONFIDENCE_WEIGHTS",
    "DEFAULT_CONFIDENCE",
    "FIELD_NAMES",
    "MEMORULE_KINDS",
    "SCOPES",
    "SOURCE_TYPES",
    "AuditEvent",
    "MemoruleFields",
    "MemoruleState",
    "MemorulesSource",
    "NewMemorule",
    "RecallMatch",
    "RecallQuery",
    "WriterSession",
    "audit_events",
    "context_overlap",
    "create_memorule",
    "delete_memorule",
    "field_errors",
    "fields_errors",
    "memorule_errors",
    "memorule_history",
    "rank_key",
    "recall_memorules_on",
    "semantic_recall",
    "session_errors",
    "update_memorule",
]
