"""PostgreSQL + pgvector storage for many agents on many machines (issue 15).

Needs the extra `context-broker[postgres]`; importing this package does not (the driver is
loaded on first use, `_driver`). `PostgresEngine` implements the storage engine protocol
(`sources.storage._engine`). Modules:

- `_driver`: the lazy driver import, URL checks, and driver errors translated once.
- `_ddl`: the tables (the SQLite schema's, plus tenant columns, `docs` and `term_stats`).
- `_schema`: versioned migrations, the application role and the tenant wall (RLS).
- `_database`: `PostgresDatabase`, a connection pool used from worker threads, one
  transaction per unit of work, cut at the caller's deadline.
- `_sql`: a statement's tenant scope and the namespace's write lock.
- `_engine`, `_reader`, `_index`, `_corpora`, `_memorules`, `_graph`: the engine, a read
  and a write, the lexical index and its statistics, and each corpus's rows.
"""

from __future__ import annotations

from ._database import PostgresDatabase as PostgresDatabase
from ._database import Session as Session
from ._driver import StatementCancelledError as StatementCancelledError
from ._driver import is_postgres_url as is_postgres_url
from ._engine import PostgresEngine as PostgresEngine
from ._schema import SCHEMA_VERSION as SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "PostgresDatabase",
    "PostgresEngine",
    "Session",
    "StatementCancelledError",
    "is_postgres_url",
]
