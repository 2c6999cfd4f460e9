"""The memorule values: constants, the writer, a state, an audit event, a recall match."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypedDict

import attrs

from broker import Namespace

MEMORULE_KINDS: Final[tuple[str, ...]] = (
    "behavioral_rule",
    "feedback",
    "preference",
    "correction",
    "convention",
)
"""What a memorule records: a rule, feedback on an action, a preference, a correction of a
mistake, or a convention to respect."""
CONFIDENCE_LEVELS: Final[tuple[str, ...]] = ("observed", "inferred", "asserted")
"""How the writer knows: witnessed, derived from a pattern, or claimed."""
CONFIDENCE_WEIGHTS: Final[Mapping[str, int]] = {"observed": 3, "inferred": 2, "asserted": 1}
"""Ranking weight of each confidence level (multiplies the applies_to overlap)."""
DEFAULT_CONFIDENCE: Final = "inferred"
SCOPES: Final[tuple[str, ...]] = ("global", "org", "project", "persona")
"""Levels a memorule applies at, broadest first."""
APPLIES_TO_KEYS: Final[tuple[str, ...]] = ("persona", "surface", "specialization", "scope")
SOURCE_TYPES: Final[tuple[str, ...]] = ("memory", "memorule")
AUDIT_ACTIONS: Final[tuple[str, ...]] = ("create", "update", "delete")
MIN_SUBJECT_CHARS: Final = 4
MIN_BODY_CHARS: Final = 10
MAX_KEY_CHARS: Final = 200
MAX_TOP_K: Final = 1000
FIELD_NAMES: Final[tuple[str, ...]] = (
    "memorule_kind",
    "subject",
    "body",
    "applies_to",
    "confidence",
    "evidence_signal_id",
)
"""A memorule's own fields, in the order their errors are reported."""
REQUIRED_FIELDS: Final = frozenset({"memorule_kind", "subject", "body", "applies_to"})


def now() -> str:
    """The time of a write, as stored: ISO-8601 in UTC, to the microsecond."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


@attrs.frozen(kw_only=True)
class WriterSession:
    """The session writing a memorule: its id and persona, recorded in state and audit."""

    session_id: str
    persona: str


@attrs.frozen(kw_only=True)
class Stamp:
    """Who writes (None only for the records of old versions) and when: what a write's state
    and its audit event record."""

    session: WriterSession | None
    at: str = attrs.field(factory=now)

    @property
    def session_id(self) -> str | None:
        """The writer's session id, if any."""
        return None if self.session is None else self.session.session_id

    @property
    def persona(self) -> str | None:
        """The writer's persona, if any."""
        return None if self.session is None else self.session.persona


@attrs.frozen(kw_only=True)
class MemoruleFields:
    """A memorule's own fields, validated: what each state records."""

    memorule_kind: str
    subject: str
    body: str
    applies_to: Mapping[str, str]
    confidence: str
    evidence_signal_id: str | None

    @property
    def text(self) -> str:
        """The entry's text: subject and body, so both are indexed."""
        return f"{self.subject}\n{self.body}"

    def applies_json(self) -> str:
        """`applies_to` as stored: compact JSON, keys sorted."""
        return json.dumps(dict(sorted(self.applies_to.items())), ensure_ascii=False, separators=(",", ":"))

    def metadata_json(self) -> str:
        """The entry's metadata: the fields a memorule recalled as plain memory still carries."""
        return json.dumps(
            {
                "memorule_kind": self.memorule_kind,
                "applies_to": dict(sorted(self.applies_to.items())),
                "confidence": self.confidence,
                "evidence_signal_id": self.evidence_signal_id,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )

    def changed(self, changes: Mapping[str, Any]) -> MemoruleFields:
        """These fields with `changes` (field -> new value) applied."""
        out = attrs.evolve(self, **changes)
        return attrs.evolve(out, applies_to=dict(out.applies_to))


class MemoruleChanges(TypedDict, total=False):
    """The fields `update_memorule` may change (None, or absent, keeps one)."""

    memorule_kind: str | None
    subject: str | None
    body: str | None
    applies_to: Mapping[str, str] | None
    evidence_signal_id: str | None
    confidence: str | None


@attrs.frozen(kw_only=True)
class NewMemorule:
    """A validated memorule to create: its fields, its writer and its entry's own fields."""

    fields: MemoruleFields
    session: WriterSession | None
    memory_type: str | None = None
    id: str | None = None
    importance: float = 0.5


@attrs.frozen(kw_only=True)
class MemoruleState(MemoruleFields):
    """One version of a memorule (the newest is current): its fields, who wrote them and when."""

    memorule_id: str
    namespace: Namespace
    version: int
    written_by_session_id: str | None
    written_by_persona: str | None
    written_at: str

    @classmethod
    def of(
        cls, memorule_id: str, namespace: Namespace, fields: MemoruleFields, stamp: Stamp, *, version: int
    ) -> MemoruleState:
        """The state `fields` written by `stamp`, numbered `version`."""
        return cls(
            **attrs.asdict(fields, recurse=False) | {"applies_to": dict(fields.applies_to)},
            memorule_id=memorule_id,
            namespace=namespace,
            version=version,
            written_by_session_id=stamp.session_id,
            written_by_persona=stamp.persona,
            written_at=stamp.at,
        )

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict: its id, namespace and version first."""
        out = attrs.asdict(self, recurse=False)
        head = {key: out.pop(key) for key in ("memorule_id", "namespace", "version")}
        return head | out | {"namespace": str(self.namespace), "applies_to": dict(self.applies_to)}


@attrs.frozen(kw_only=True)
class AuditEvent:
    """One memorule write, as recorded in the same transaction as the write."""

    memorule_id: str
    action: str
    written_by_session_id: str | None
    written_by_persona: str | None
    evidence_signal_id: str | None
    written_at: str
    tenant_id: str
    project_id: str

    @classmethod
    def of(
        cls, namespace: Namespace, memorule_id: str, action: str, stamp: Stamp, evidence_signal_id: str | None
    ) -> AuditEvent:
        """The event of one write (`action`) by `stamp`."""
        return cls(
            memorule_id=memorule_id,
            action=action,
            written_by_session_id=stamp.session_id,
            written_by_persona=stamp.persona,
            evidence_signal_id=evidence_signal_id,
            written_at=stamp.at,
            tenant_id=namespace.tenant_id,
            project_id=namespace.project_id,
        )

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (also the fields of the `memorule.audit` log event)."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class RecallMatch:
    """One result of `semantic_recall`; the memorule fields are None for other memories."""

    id: str
    namespace: Namespace
    kind: str
    text: str
    score: float
    memory_type: str | None
    created_at: str
    memorule_kind: str | None = None
    applies_to: Mapping[str, str] | None = None
    confidence: str | None = None
    evidence_signal_id: str | None = None
    written_at: str | None = None
    overlap: int | None = None
    rank_weight: int | None = None
    qpp: float | None = None
    band: float | None = None
    rowid: int | None = attrs.field(default=None, eq=False, repr=False)
    """The entry's rowid (its key in the turn's retrieval); None when not known."""

    @property
    def source_type(self) -> str:
        """`memorule` for a memorule, `memory` for any other memory (`semantic_recall`'s filter)."""
        return "memorule" if self.kind == "memorule" else "memory"

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (without the rowid, a key of this store's only)."""
        out = attrs.asdict(self, recurse=False, filter=lambda a, _v: a.name != "rowid")
        out["namespace"] = str(self.namespace)
        out["source_type"] = self.source_type
        if self.applies_to is not None:
            out["applies_to"] = dict(self.applies_to)
        return out
