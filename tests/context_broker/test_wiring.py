from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_broker import wiring
from sources import StoreError


def test_the_bundled_sample_is_read_as_numbered_json_lines():
    """The demo's sample ships as package data: every non-blank line one JSON record, numbered from 1."""
    lines = wiring.sample_lines()
    assert lines[0][0] == 1
    assert len(lines) == 71
    assert all(isinstance(json.loads(text), dict) for _, text in lines)


def test_the_database_path_is_the_environments_when_set(monkeypatch, tmp_path):
    """`$CONTEXT_BROKER_DB` names the database every command opens when `--db` is not given."""
    monkeypatch.setenv(wiring.ENV_DB, str(tmp_path / "mine.db"))
    assert wiring.default_db_path() == tmp_path / "mine.db"


def test_the_database_path_defaults_to_the_user_data_directory(monkeypatch, tmp_path):
    """Without the variable the database is memory.db under the user's data directory."""
    monkeypatch.delenv(wiring.ENV_DB, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert wiring.default_db_path() == tmp_path / "context-broker" / "memory.db"


async def test_a_store_opens_in_the_mode_asked_and_a_reader_never_creates_one(tmp_path: Path):
    """`open_store_in_thread` opens in the given mode; with create=False a missing file is a StoreError."""
    store = await wiring.open_store_in_thread(tmp_path / "m.db", mode="lexical")
    try:
        assert store.mode == "lexical"
    finally:
        store.close()
    with pytest.raises(StoreError):
        await wiring.open_store_in_thread(tmp_path / "missing.db", mode="lexical", create=False)
    assert not (tmp_path / "missing.db").exists()
