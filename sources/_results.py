"""Each source's answer, kept across turns until what it was read from changes.

An agent asks about one task for many turns. A source's candidates depend only on the request
(task text, namespace, types, limit, session context, mode) and on the rows of the namespace,
so they are kept under the namespace's write generation, read in the same worker thread
just before the source would run (one indexed read). Schema triggers bump that generation on
every insert, update and delete of every namespace table, from any process or connection,
so any write misses the cache and nothing needs invalidating by hand.

Why this is exact. The generation is read before the source's own statements, and every
statement sees a snapshot at least as new, so an answer is never older than the generation
it is kept under; a later turn that reads a newer generation misses it. Nothing a source
scores depends on the wall clock (there is no recency term), nor on other namespaces — but
memorules, which also read the tenant-wide rules of the tenant's other projects: that source
keys on every generation of the tenant (`tenant_version`).

Cached candidates are shared between the turns that get them: their `metadata` is a
read-only Mapping, as everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ._singleflight import SingleFlight

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Hashable

    from broker import Candidate, Namespace

DEFAULT_RESULT_CACHE: Final = 1024
"""Answers kept per store reader (all its sources together; about 128 queries of 8 sources)."""

Version = tuple[tuple[int, int], ...]
"""(ns_id, generation) of every namespace an answer was read from."""


def namespace_version(conn: sqlite3.Connection, namespace: Namespace) -> Version:
    """The namespace's (ns_id, generation); empty while nothing was ever written to it."""
    rows = conn.execute(
        "SELECT ns_id, generation FROM namespaces WHERE tenant_id = ? AND project_id = ?",
        (namespace.tenant_id, namespace.project_id),
    ).fetchall()
    return tuple((int(r[0]), int(r[1])) for r in rows)


def tenant_version(conn: sqlite3.Connection, namespace: Namespace) -> Version:
    """(ns_id, generation) of every namespace of the tenant (a new project changes it too)."""
    rows = conn.execute(
        "SELECT ns_id, generation FROM namespaces WHERE tenant_id = ? ORDER BY ns_id",
        (namespace.tenant_id,),
    ).fetchall()
    return tuple((int(r[0]), int(r[1])) for r in rows)


class ResultCache:
    """At most `size` recent answers (LRU), each computed once however many turns ask at once."""

    def __init__(self, size: int = DEFAULT_RESULT_CACHE) -> None:
        self._answers: SingleFlight[Hashable, tuple[Candidate, ...]] = SingleFlight(size=size)

    def get(self, key: Hashable, compute: Callable[[], tuple[Candidate, ...]]) -> tuple[Candidate, ...]:
        """The kept answer of `key`, or `compute()`'s (kept unless it raises)."""
        return self._answers.get(key, compute)

    def clear(self) -> None:
        """Forget every answer."""
        self._answers.clear()
