"""The storage engine contract (`tests/sources/test_engine_contract.py`) run on
`PostgresEngine`: the same tests, with an `engine` fixture of a fresh PostgreSQL database.

It runs wherever the contract tests are in the tree (they come with the engine's branch);
without them this module skips, saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from pg_server import require

from sources.storage._postgres import PostgresEngine

if TYPE_CHECKING:
    from collections.abc import Iterator

require("psycopg")
contract = pytest.importorskip(
    "test_engine_contract", reason="the engine contract tests are not in this tree"
)

# The contract's tests, collected here too: in this module, `engine` is the fixture below.
globals().update({name: test for name, test in vars(contract).items() if name.startswith("test_")})


@pytest.fixture
def engine(pg_url: str) -> Iterator[PostgresEngine]:
    """A PostgresEngine on a fresh database."""
    opened = PostgresEngine.open(pg_url, connections=2)
    yield opened
    opened.close()
