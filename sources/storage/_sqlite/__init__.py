"""The SQLite storage engine: one file, the zero-configuration default (`sources.storage._engine`)."""

from ._engine import SqliteEngine as SqliteEngine
from ._reader import SqliteReader as SqliteReader
from ._reader import SqliteWriter as SqliteWriter
from ._schema import ensure_memory_type_column as ensure_memory_type_column

__all__ = ["SqliteEngine", "SqliteReader", "SqliteWriter", "ensure_memory_type_column"]
