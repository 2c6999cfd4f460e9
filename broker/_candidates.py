"""The boundary between a source and the broker: a source's answer is checked before it is used.

A source is code the broker does not control. Whatever it returns is deduplicated, rendered,
priced and logged after the turn's deadline, so one malformed candidate (`text=None`, an
`entry_id` of 123) must not raise there, and one huge text must not make the turn late.
`validate_candidates` is the one place that decides: it runs in the source's actor, in the
source's own time, as soon as `fetch` returns. A malformed answer fails that source (status
`failed`, error `CandidateError`, counted by its circuit breaker); the turn goes on with the
others. A text longer than `MAX_TEXT_CHARS` is cut to that length, never refused: it may be
the best memory of the turn, and the cut bounds the work every later step does on it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Final, overload

import attrs

from ._blocks import MEMORY_BLOCKS
from ._exceptions import CandidateError
from ._fields import MAX_ID_CHARS, MAX_TEXT_CHARS
from ._model import Candidate, optional_unit


def _as_tuple(candidates: Iterable[Candidate]) -> tuple[Candidate, ...]:
    return tuple(candidates)


def _as_frozenset(keys: Iterable[Hashable]) -> frozenset[Hashable]:
    return frozenset(keys)


@attrs.frozen(kw_only=True, eq=False)
class SourceAnswer(Sequence[Candidate]):
    """A source's answer that also says which memories it considered: its candidates, as the
    sequence `Source.fetch` returns, and `considered`, the keys of the memories its retrieval
    weighed, returned or not (below the floor included). A source may return one instead of a
    plain sequence; the trace then counts those memories among `memory_candidates`, each once
    (a candidate drawn from them carries its key as `Candidate.retrieval_key`). Measurement,
    never injection: nothing considered is selected unless it is a candidate.

    `qpp` is the task's gate the source read (`Candidate.qpp`), also when it returned nothing
    because the gate was under the floor: the turn then reports how far the gate stayed from
    opening (None: the source read no gate).

    It compares and hashes as the tuple of its candidates, so `answer == []` still says "no
    candidate" to a caller that reads the answer as a list.
    """

    candidates: tuple[Candidate, ...] = attrs.field(default=(), converter=_as_tuple)
    considered: frozenset[Hashable] = attrs.field(default=frozenset(), converter=_as_frozenset)
    qpp: float | None = attrs.field(default=None, validator=optional_unit)

    @overload
    def __getitem__(self, index: int) -> Candidate: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Candidate]: ...
    def __getitem__(self, index: int | slice) -> Candidate | Sequence[Candidate]:
        return self.candidates[index]

    def __len__(self) -> int:
        return len(self.candidates)

    def __iter__(self) -> Iterator[Candidate]:
        return iter(self.candidates)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SourceAnswer):
            return self.candidates == other.candidates
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return self.candidates == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.candidates)


def validate_candidates(found: object) -> tuple[Candidate, ...]:
    """Return a source's answer as a tuple of valid candidates, or raise CandidateError.

    The answer must be a sequence (not a string) whose items each pass `validate_candidate`.
    """
    if isinstance(found, str | bytes) or not isinstance(found, Sequence):
        raise CandidateError(f"a source must return a sequence of Candidate, got {type(found).__name__}")
    return tuple(validate_candidate(c) for c in found)


def considered_of(found: object) -> frozenset[Hashable]:
    """The keys of the memories a source's answer says it considered (a `SourceAnswer`'s
    `considered`; nothing for a plain sequence), or CandidateError if they are not a frozenset."""
    if not isinstance(found, SourceAnswer):
        return frozenset()
    considered: object = found.considered
    if not isinstance(considered, frozenset):
        raise CandidateError(f"considered must be a frozenset, got {type(considered).__name__}")
    return considered


@attrs.frozen
class Reading:
    """What a source's answer says beside its candidates: the memories it considered and the
    gate it read (`SourceAnswer`; nothing for a plain sequence)."""

    considered: frozenset[Hashable] = frozenset()
    qpp: float | None = None


NOTHING_READ: Final = Reading()
"""A plain sequence's reading, and a job's before its source answers."""


def reading_of(found: object) -> Reading:
    """The answer's `Reading`, checked (CandidateError if malformed)."""
    return Reading(considered=considered_of(found), qpp=gate_of(found))


def gate_of(found: object) -> float | None:
    """The gate a source's answer says it read (a `SourceAnswer`'s `qpp`; None for a plain
    sequence), or CandidateError if it is not a probability."""
    if not isinstance(found, SourceAnswer) or found.qpp is None:
        return None
    qpp: object = found.qpp
    if isinstance(qpp, bool) or not isinstance(qpp, int | float) or not 0.0 <= qpp <= 1.0:
        raise CandidateError(f"qpp must be a probability in [0, 1], got {qpp!r}")
    return float(qpp)


def validate_candidate(candidate: object) -> Candidate:
    """Return `candidate` as the broker may use it, or raise CandidateError saying what is wrong.

    - a `Candidate` (or subclass);
    - `entry_id` and `source`: non-empty strings of at most `MAX_ID_CHARS` characters, valid
      Unicode (no lone surrogates);
    - `text`: a string, cut to `MAX_TEXT_CHARS` characters when longer;
    - `score`: a finite number in [0, 1]; `block`: one of `MEMORY_BLOCKS`;
    - `memory_type` and `created_at`: None or a string of at most `MAX_ID_CHARS` characters;
    - `metadata`: a mapping; `retrieval_key`: None or hashable.
    """
    if not isinstance(candidate, Candidate):
        raise CandidateError(f"expected a Candidate, got {type(candidate).__name__}")
    problems = [
        *_id_problems("entry_id", candidate.entry_id),
        *_id_problems("source", candidate.source),
        *_optional_problems("memory_type", candidate.memory_type),
        *_optional_problems("created_at", candidate.created_at),
    ]
    text: object = candidate.text
    if not isinstance(text, str):
        problems.append(f"text must be a string, got {type(text).__name__}")
    score: object = candidate.score
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        problems.append("score must be a finite number")
    elif not 0.0 <= score <= 1.0:
        problems.append("score must be in [0, 1]")
    if candidate.block not in MEMORY_BLOCKS:
        problems.append(f"block must be one of {', '.join(MEMORY_BLOCKS)}")
    metadata: object = candidate.metadata
    if not isinstance(metadata, Mapping):
        problems.append("metadata must be a mapping")
    if not _hashable(candidate.retrieval_key):
        problems.append("retrieval_key must be hashable")
    if problems:
        raise CandidateError(f"malformed candidate: {'; '.join(problems)}", source=_name(candidate))
    if len(candidate.text) > MAX_TEXT_CHARS:
        return attrs.evolve(candidate, text=candidate.text[:MAX_TEXT_CHARS])
    return candidate


def _id_problems(field: str, value: object) -> list[str]:
    if not isinstance(value, str) or not value.strip():
        return [f"{field} must be a non-empty string, got {type(value).__name__}"]
    if len(value) > MAX_ID_CHARS:
        return [f"{field} must be at most {MAX_ID_CHARS} characters"]
    return _encoding_problems(field, value)


def _optional_problems(field: str, value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, str) or len(value) > MAX_ID_CHARS:
        return [f"{field} must be None or a string of at most {MAX_ID_CHARS} characters"]
    return _encoding_problems(field, value)


def _encoding_problems(field: str, value: str) -> list[str]:
    if value.isascii():  # no lone surrogate can hide in ASCII
        return []
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return [f"{field} must be valid Unicode (no lone surrogates)"]
    return []


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _name(candidate: Candidate) -> str:
    return candidate.source if isinstance(candidate.source, str) else ""
