"""`open_store`: a path or `sqlite:///` URL opens SQLite, a PostgreSQL URL the PostgreSQL engine
(tests against a real server: tests/sources/storage/postgres/test_store_on_postgres.py); other URLs are refused
with ConfigError. `MemoryStore.open` opens SQLite only and refuses the rest the same way."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from broker import ConfigError, Namespace
from sources import MemoryStore, SqliteEngine, StoreError, open_store, store_path, store_target

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
def test_a_postgresql_url_names_a_server_not_a_file(url: str) -> None:
    """`store_target` keeps the URL for the PostgreSQL engine; `store_path` refuses it, no password shown."""
    assert store_target(url) == url
    with pytest.raises(ConfigError, match="server, not a file") as info:
        store_path(url)
    assert "pw" not in str(info.value)


def test_an_unreachable_postgresql_server_is_a_store_error_without_the_password() -> None:
    """With the extra installed, a server that refuses the connection is one StoreError line."""
    pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    with pytest.raises(StoreError, match="unreachable") as info:
        open_store("postgresql://u:pw@127.0.0.1:1/db", mode="lexical")
    assert "pw" not in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("target", ["mysql://host/db", "", "  "])
def test_an_unknown_scheme_or_an_empty_target_is_a_config_error(target: str) -> None:
    """Anything that is neither a path nor a known URL is refused before a file is touched."""
    with pytest.raises(ConfigError):
        store_path(target)


@pytest.mark.parametrize(
    "target", ["postgresql://u:pw@host/db", "host=db.internal dbname=app password=pw", "mysql://host/db"]
)
def test_memory_store_open_refuses_what_is_not_a_sqlite_file(
    target: str, tmp_path: Path, monkeypatch
) -> None:
    """`MemoryStore.open` given a server URL or a connection string is a ConfigError (PostgreSQL:
    naming `open_store`), no password shown, and no file or directory created under its name."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        MemoryStore.open(target, mode="lexical")
    assert "pw" not in str(info.value)
    assert ("open_store" in str(info.value)) == target.startswith("postgresql")
    assert list(tmp_path.iterdir()) == []


def test_memory_store_open_reads_a_sqlite_url(tmp_path: Path) -> None:
    """`MemoryStore.open` takes `sqlite:///` as `open_store` does."""
    with MemoryStore.open(f"sqlite:///{tmp_path / 's.db'}", mode="lexical") as store:
        assert isinstance(store.engine, SqliteEngine)
    assert (tmp_path / "s.db").exists()


@pytest.mark.parametrize(
    "target", [123, None, b"x.db", "x.db\0y", ":memory:", "file:x.db", "FILE:x.db?mode=ro"]
)
def test_a_target_that_is_no_file_path_is_a_config_error(target: object, tmp_path: Path, monkeypatch) -> None:
    """Not a string or path, a NUL character, SQLite's `:memory:` or a `file:` URI: a ConfigError from
    `open_store` and `MemoryStore.open` alike, and nothing created (it became a file of that name)."""
    monkeypatch.chdir(tmp_path)
    for opener in (open_store, MemoryStore.open):
        with pytest.raises(ConfigError):
            opener(target, mode="lexical")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_any_path_like_is_a_path_and_a_one_letter_scheme_is_a_drive() -> None:
    """An `os.PathLike` that is not a `Path` is taken literally, `C://data/s.db` is a path, not a
    URL scheme, and an unknown `~user` is a ConfigError (it was a RuntimeError)."""
    assert store_path(PurePosixPath("/srv/s.db")) == Path("/srv/s.db")
    assert store_path("C://data/s.db") == Path("C:/data/s.db")
    with pytest.raises(ConfigError):
        store_path("~no-such-user-here/x.db")
