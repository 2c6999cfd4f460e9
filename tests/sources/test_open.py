"""`open_store`: a path or `sqlite:///` URL opens SQLite; other URLs are refused with ConfigError."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker import ConfigError, Namespace
from sources import SqliteEngine, open_store, store_path

NS = Namespace(tenant_id="t")


def test_a_path_and_its_sqlite_url_open_the_same_store(tmp_path: Path) -> None:
    """What one spelling writes, the other reads."""
    path = tmp_path / "s.db"
    with open_store(path, mode="lexical") as store:
        assert isinstance(store.engine, SqliteEngine)
        store.add_entry("The release train leaves on Tuesdays.", namespace=NS)
    with open_store(f"sqlite:///{path}", mode="lexical", create=False) as store:
        assert [m.text for m in store.list_entries(namespace=NS)] == ["The release train leaves on Tuesdays."]


def test_a_relative_sqlite_url_is_a_relative_path() -> None:
    """`sqlite:///x.db` is `x.db`, as SQLAlchemy spells it."""
    assert store_path("sqlite:///x.db") == Path("x.db")


@pytest.mark.parametrize("url", ["postgresql://u:pw@host/db", "postgres://host/db", "POSTGRESQL://host/db"])
def test_a_postgresql_url_is_a_config_error_naming_the_extra(url: str) -> None:
    """Not wired yet: the error says what is missing and never shows a password."""
    with pytest.raises(ConfigError, match=r"\[postgres\]") as info:
        open_store(url)
    assert "pw" not in str(info.value)


@pytest.mark.parametrize("target", ["mysql://host/db", "", "  "])
def test_an_unknown_scheme_or_an_empty_target_is_a_config_error(target: str) -> None:
    """Anything that is neither a path nor a known URL is refused before a file is touched."""
    with pytest.raises(ConfigError):
        store_path(target)
