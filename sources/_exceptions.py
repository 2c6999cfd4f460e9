"""The error the sources add to the broker's tree (`broker._exceptions`).

    broker.SourceError
    ├── StoreError     the SQLite file is unusable (not a database, corrupt, locked)
    └── EmbedderError  an embedder returned vectors the store cannot use

SQLite errors are translated into it once, at the store boundary (`sources.storage._sqlite._db`).
"""

from __future__ import annotations

from broker import SourceError


class StoreError(SourceError):
    """Raised when the SQLite file is unusable: not a database, corrupt, or locked too long."""

    def __init__(self, message: str, *, source: str = "store") -> None:
        super().__init__(message, source=source)


class EmbedderError(SourceError):
    """Raised when an embedder returns vectors the store cannot use: another shape than one row
    of its `dim` values per text, or a NaN or infinite value. Nothing is written with them."""

    def __init__(self, message: str, *, source: str = "embedder") -> None:
        super().__init__(message, source=source)
