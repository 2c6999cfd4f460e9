"""The error tree of context-broker.

    BrokerError
    ├── ConfigError (ValueError)       bad configuration or arguments
    ├── ValidationError (ValueError)   bad input; carries every field error at once
    ├── BrokerClosedError              the actor was used after it closed
    └── SourceError                    a source could not do its work
        ├── CandidateError             a source returned a malformed candidate
        ├── (sources.StoreError        the SQLite file is unusable: raised by the sources package)
        └── (sources.EmbedderError     an embedder returned unusable vectors: the sources package)

Inside a turn, a source failure is data (a status in the trace), not an exception.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs


class BrokerError(Exception):
    """Base of every error context-broker raises on purpose."""


class ConfigError(BrokerError, ValueError):
    """Raised when configuration or an argument is invalid before any work starts."""


@attrs.frozen(kw_only=True)
class FieldError:
    """One invalid field: the API field name, a stable code and a human message."""

    field: str
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} ({self.code})"


class ValidationError(BrokerError, ValueError):
    """Raised when input is invalid; carries ALL field errors, and nothing was written."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__("; ".join(str(e) for e in self.errors) or "invalid input")

    @classmethod
    def single(cls, field: str, code: str, message: str) -> ValidationError:
        """A validation error about one field."""
        return cls([FieldError(field=field, code=code, message=message)])


class BrokerClosedError(BrokerError):
    """Raised when a selector, broker or store is used after it closed."""


class SourceError(BrokerError):
    """Raised by a source that cannot do its work; `source` names it."""

    def __init__(self, message: str, *, source: str = "") -> None:
        self.source = source
        super().__init__(message)


class CandidateError(SourceError):
    """Raised by `validate_candidate` when a source returns a malformed candidate.

    Inside a turn it is never raised to the caller: the source that returned the candidate
    is reported `failed` with error `CandidateError`, and the turn goes on without it.
    """
