"""The error the sources add to the broker's tree (`broker._exceptions`).

    broker.SourceError
    └── StoreError     the SQLite file is unusable (not a database, corrupt, locked)

SQLite errors are translated into it once, at the store boundary (`sources._sqlite._db`).
"""

from __future__ import annotations

from broker import SourceError


class StoreError(SourceError):
    """Raised when the SQLite file is unusable: not a database, corrupt, or locked too long."""

    def __init__(self, message: str, *, source: str = "store") -> None:
        super().__init__(message, source=source)
