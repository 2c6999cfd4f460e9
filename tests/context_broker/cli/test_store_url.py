"""`--db` and `CONTEXT_BROKER_DB` take a path or a URL: `sqlite:///` opens SQLite, a
PostgreSQL URL is refused on one line (exit 2) until that engine is wired in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pathlib import Path


def test_a_sqlite_url_opens_the_file_it_names(cli: Any, tmp_path: Path) -> None:
    """`sqlite:////abs/path` is the same store as the path itself."""
    path = tmp_path / "u.db"
    assert cli("--db", f"sqlite:///{path}", "remember", "Deploys freeze on Fridays").status == 0
    listed = cli("--db", str(path), "stats")
    assert listed.status == 0
    assert "entries   1 in default/default" in listed.out


@pytest.mark.parametrize("via_env", [False, True])
def test_a_postgresql_url_exits_2_with_one_line(
    cli: Any, monkeypatch: pytest.MonkeyPatch, via_env: bool
) -> None:
    """The PostgreSQL engine is not wired: one line naming the extra, the password never shown."""
    url = "postgresql://agent:s3cret@db.example/memory"
    if via_env:
        monkeypatch.setenv("CONTEXT_BROKER_DB", url)
        ran = cli("stats")
    else:
        ran = cli("--db", url, "stats")
    assert ran.status == 2
    assert len(ran.err_lines) == 1
    assert "[postgres]" in ran.err_lines[0]
    assert "s3cret" not in ran.err_lines[0]
