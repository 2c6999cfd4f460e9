"""The optional driver, loaded on first use, and the one place its errors are translated.

`psycopg` is an extra (`context-broker[postgres]`): importing `sources` never needs it, and
asking for PostgreSQL without it is a ConfigError that names the extra. A bad URL is a
ConfigError before any connection is tried; an unreachable server, a refused login or a
failed statement is a one-line StoreError; a statement cancelled at the deadline (by the
interrupt or by its `statement_timeout`) is a `StatementCancelledError`: a StoreError, as the
engine protocol asks, and a TimeoutError, which is what happened.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from types import ModuleType
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qsl, urlsplit

from broker import ConfigError
from sources._exceptions import StoreError

if TYPE_CHECKING:
    from collections.abc import Iterator

EXTRA: Final = "context-broker[postgres]"
SCHEMES: Final = frozenset({"postgresql", "postgres"})


class StatementCancelledError(StoreError, TimeoutError):
    """Raised when the server cancelled a statement: the caller's deadline passed (its
    interrupt) or the statement outlived its `statement_timeout`. Its transaction was rolled
    back: nothing of it was written."""


def psycopg() -> ModuleType:
    """The `psycopg` module; ConfigError naming the extra when it is not installed."""
    return _load("psycopg")


def psycopg_pool() -> ModuleType:
    """The `psycopg_pool` module; ConfigError naming the extra when it is not installed."""
    return _load("psycopg_pool")


def pgvector_psycopg() -> ModuleType:
    """The `pgvector.psycopg` adapters (numpy arrays as `vector` values)."""
    return _load("pgvector.psycopg")


def _load(name: str) -> ModuleType:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"PostgreSQL needs the optional dependencies: pip install '{EXTRA}'") from exc
    _quiet_unless_configured()
    return module


def _quiet_unless_configured() -> None:
    """Give the driver's logger (`psycopg`, the pool's `psycopg.pool` below it) a NullHandler.

    The driver logs warnings of its own (a rollback refused after a cancel that arrived late, a
    connection returned to the pool mid-transaction); in a host that configured no logging,
    Python would print them on stderr as its last resort, and the library prints nothing. A host
    that configured logging still gets every record: levels and propagation are untouched.
    """
    driver = logging.getLogger("psycopg")
    if not any(isinstance(h, logging.NullHandler) for h in driver.handlers):
        driver.addHandler(logging.NullHandler())


def is_postgres_url(url: str) -> bool:
    """True when `url` names a PostgreSQL server (`postgresql://` or `postgres://`)."""
    scheme, sep, _ = url.strip().partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def check_url(url: str) -> str:
    """Return `url` if it is a well-formed PostgreSQL URL; ConfigError otherwise.

    Checked before anything connects, so a typo is a configuration error, not a timeout.
    The password is never repeated in the message. An `@` inside the user name or password
    must be percent-encoded (`%40`): libpq and URL parsers disagree on where such a host
    begins, and the password would then reach a message as part of a host name.
    """
    if not is_postgres_url(url):
        raise ConfigError(f"not a PostgreSQL URL (want postgresql://...): {redact(url)}")
    try:
        netloc = urlsplit(url).netloc
    except ValueError as exc:
        raise ConfigError(f"bad PostgreSQL URL {redact(url)}: {_one_line(exc)}") from exc
    if netloc.count("@") > 1:
        msg = f"bad PostgreSQL URL {redact(url)}: percent-encode '@' in the user name or password (%40)"
        raise ConfigError(msg)
    try:
        psycopg().conninfo.conninfo_to_dict(url)
    except psycopg().ProgrammingError as exc:
        raise ConfigError(f"bad PostgreSQL URL {redact(url)}: {_one_line(exc)}") from exc
    return url


_SECRET_KEYS: Final = frozenset({"password", "sslpassword"})


def redact(url: str) -> str:
    """The URL without its secrets (the password of the user part, and `password=` or
    `sslpassword=` in the query), for messages and logs; a URL that does not parse is shown
    by its scheme alone."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port raises for a malformed host part
    except ValueError:
        return f"{url.partition('://')[0]}://<unparsable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        name, colon, _password = user.partition(":")
        netloc = f"{name}{':***' if colon else ''}@{host}"
    query = "&".join(
        f"{key}={'***' if key.lower() in _SECRET_KEYS else value}"
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    tail = (f"?{query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return f"{parts.scheme}://{netloc}{parts.path}{tail}"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


@contextlib.contextmanager
def translated(where: str) -> Iterator[None]:
    """Turn driver errors into StoreError (`StatementCancelledError` for a cancelled statement).

    `where` names the server (a redacted URL) so the message says which one failed.
    """
    pg = psycopg()
    pool = psycopg_pool()
    try:
        yield
    except pg.errors.QueryCanceled as exc:
        raise StatementCancelledError(f"{where}: {_one_line(exc)}", source="postgres") from exc
    except pool.PoolTimeout as exc:
        raise StoreError(
            f"{where}: no connection to the server ({_one_line(exc)})", source="postgres"
        ) from exc
    except pg.OperationalError as exc:
        refused = "authentication failed" in str(exc)
        what = "login refused" if refused else "server unreachable or gone"
        raise StoreError(f"{where}: {what} ({_one_line(exc)})", source="postgres") from exc
    except pg.Error as exc:
        raise StoreError(f"{where}: {_one_line(exc)}", source="postgres") from exc
