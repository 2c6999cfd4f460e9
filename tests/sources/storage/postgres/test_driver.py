"""The driver's URL checks and redaction: no message or log line ever carries a password."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from broker import ConfigError
from sources import open_store, store_target
from sources.storage._postgres._driver import check_url, redact

SECRET_URLS = [
    "postgresql://agent:AgentPw9@db.example:5432/memory",
    "postgresql:///memory?user=agent&password=AgentPw9&host=/tmp/sock",
    "postgres://db.example/memory?sslmode=require&sslpassword=AgentPw9",
    "postgresql://agent:AgentPw9@[::1/memory",
]


@pytest.mark.parametrize("url", SECRET_URLS)
def test_a_redacted_url_never_carries_the_password(url: str) -> None:
    """Whatever the spelling (user part, query parameter, unparsable host), the secret is gone."""
    shown = redact(url)
    assert "AgentPw9" not in shown
    assert shown.startswith(url.partition("://")[0] + "://")


def test_redaction_keeps_everything_but_the_secret() -> None:
    """The user, host, database and other parameters stay, so the message still says which server."""
    assert redact("postgresql:///memory?user=agent&password=x&host=/tmp/sock") == (
        "postgresql:///memory?user=agent&password=***&host=/tmp/sock"
    )
    assert redact("postgresql://agent:x@db:5432/memory") == "postgresql://agent:***@db:5432/memory"
    assert redact("postgresql://db/memory") == "postgresql://db/memory"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("postgresql://nu:p@ssW0rd@127.0.0.1:1/db", "percent-encode"),
        ("postgresql://u:TopSecret@[::1/db", "Invalid IPv6"),
    ],
)
def test_a_url_libpq_would_misread_is_a_config_error_without_its_password(url: str, why: str) -> None:
    """An unencoded '@' or a broken host is refused before anything connects, the password unshown."""
    pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    with pytest.raises(ConfigError, match=why) as info:
        check_url(url)
    assert "ssW0rd" not in str(info.value)
    assert "TopSecret" not in str(info.value)
    with pytest.raises(ConfigError):
        open_store(url, mode="lexical")


def test_a_libpq_key_value_string_is_refused_not_made_a_file() -> None:
    """`host=... password=...` is not a path: a ConfigError that does not repeat it."""
    target = "host=127.0.0.1 port=1 user=nu password=Kw3rtyZ dbname=db"
    with pytest.raises(ConfigError) as info:
        store_target(target)
    assert "Kw3rtyZ" not in str(info.value)


def test_the_drivers_warnings_never_reach_stderr_in_a_host_that_configured_no_logging() -> None:
    """Loading the driver quiets Python's last-resort printing of its warnings; a configured host still gets them."""
    pytest.importorskip("psycopg")
    script = textwrap.dedent(
        """
        import logging, sys
        from sources.storage._postgres import _driver
        _driver.psycopg_pool()
        logging.getLogger("psycopg").warning("error ignored in rollback")
        logging.getLogger("psycopg.pool").warning("rolling back returned connection")
        logging.basicConfig(stream=sys.stdout, format="%(name)s: %(message)s")
        logging.getLogger("psycopg").warning("seen by a configured host")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stderr == ""
    assert done.stdout == "psycopg: seen by a configured host\n"
