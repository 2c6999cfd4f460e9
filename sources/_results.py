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

A turn first asks without a worker thread: an answer kept at the database's current change
stamp (`Engine.change_stamp`; SQLite's data version, which any commit of any connection changes) is
still exact, since nothing at all was written since it was read (the stamp is read before the
generation and the source's statements, so an answer is never older than its stamp). Any
commit, to any namespace, makes that check miss; the turn then reads the generation in a
worker thread as above.

Cached candidates are shared between the turns that get them: their `metadata` is a
read-only Mapping, as everywhere.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Final

from ._singleflight import SingleFlight

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence

    from broker import Candidate, Namespace

    from .storage._engine import Reader

DEFAULT_RESULT_CACHE: Final = 1024
"""Answers kept per store reader (all its sources together; about 128 queries of 8 sources)."""

Version = tuple[tuple[int, int], ...]
"""(ns_id, generation) of every namespace an answer was read from."""


def namespace_version(reader: Reader, namespace: Namespace) -> Version:
    """The namespace's (ns_id, generation); empty while nothing was ever written to it."""
    return tuple((v.ns_id, v.generation) for v in reader.versions(namespace))


def tenant_version(reader: Reader, namespace: Namespace) -> Version:
    """(ns_id, generation) of every namespace of the tenant (a new project changes it too)."""
    return tuple((v.ns_id, v.generation) for v in reader.tenant_versions(namespace.tenant_id))


class ResultCache:
    """At most `size` recent answers (LRU), each computed once however many turns ask at once.

    Each answer is also kept under the store's change stamp it was read at (`Engine.change_stamp`),
    so a turn can take it without a worker thread while nothing at all was committed since.
    """

    def __init__(self, size: int = DEFAULT_RESULT_CACHE) -> None:
        self._answers: SingleFlight[Hashable, tuple[Candidate, ...]] = SingleFlight(size=size)
        self._size = size
        self._stamped: OrderedDict[Hashable, tuple[int, Sequence[Candidate]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], tuple[Candidate, ...]]) -> tuple[Candidate, ...]:
        """The kept answer of `key`, or `compute()`'s (kept unless it raises)."""
        return self._answers.get(key, compute)

    def stamp(self, key: Hashable, stamp: int, answer: Sequence[Candidate]) -> None:
        """Keep `answer` (a tuple, or a `broker.SourceAnswer`: immutable) as the one read at
        change stamp `stamp` (read before anything else)."""
        with self._lock:
            self._stamped[key] = (stamp, answer)
            self._stamped.move_to_end(key)
            while len(self._stamped) > self._size:
                self._stamped.popitem(last=False)

    def stamped(self, key: Hashable, stamp: int) -> Sequence[Candidate] | None:
        """The answer kept at exactly this change stamp, if any."""
        with self._lock:
            kept = self._stamped.get(key)
        return kept[1] if kept is not None and kept[0] == stamp else None

    def clear(self) -> None:
        """Forget every answer."""
        self._answers.clear()
        with self._lock:
            self._stamped.clear()
