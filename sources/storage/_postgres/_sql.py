"""What every PostgreSQL corpus shares: the tenant scope of a statement, the namespace's
write lock, the corpus tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from sources.storage._engine import CORPUS_ENTRIES, CORPUS_FACTS, CORPUS_KNOWLEDGE

if TYPE_CHECKING:
    from collections.abc import Iterator, MutableMapping, Sequence
    from contextlib import AbstractContextManager

    from psycopg import Cursor
    from psycopg.rows import TupleRow

    from sources.storage._read_once import ReadOnce

    from ._database import Params, Session

CORPUS_TABLES: Final = {CORPUS_ENTRIES: "entries", CORPUS_FACTS: "facts", CORPUS_KNOWLEDGE: "knowledge"}
"""Each indexed corpus and its table."""

NS_LOCK: Final = 0x63747863
"""First key of a namespace's write lock (`pg_advisory_xact_lock(NS_LOCK, ns_id)`)."""


@attrs.define(eq=False, slots=True)
class Scope:
    """The statements of one transaction, each run inside the tenant wall.

    `ns(ns_id)` sets the tenant of that namespace before a statement about it (the ids'
    tenants are cached per engine: a namespace never changes hands), and in a write takes
    the namespace's lock; `tenant(id)` sets one by name; `every_tenant()` lifts the wall
    for the upkeep statements that span tenants.
    """

    session: Session
    tenants: MutableMapping[int, str]
    ids: MutableMapping[tuple[str, str], int] = attrs.field(factory=dict)
    """Each committed namespace's id by (tenant, project), cached per engine like `tenants`: a
    namespace is never deleted or renamed, so one found is the same row in every write (a
    read answers from its snapshot: it may have begun before the namespace was committed)."""
    writing: bool = False
    """A write's scope takes each namespace's lock before its first statement about it."""
    snapshot: ReadOnce | None = None
    """A read's values that cannot change in its snapshot (a namespace's id and generation, its
    term statistics: the lexical candidates of each corpus rank on the statistics the caller
    just read), each read once (the engine's `read`); None in a write, which reads its own
    changes."""
    _locked: set[int] = attrs.field(factory=set, init=False)
    created: set[int] = attrs.field(factory=set, init=False)
    """Namespaces this write inserted: not cached until committed (a rollback removes them)."""

    def ns(self, ns_id: int) -> Scope:
        """Scope the next statements to the tenant that owns `ns_id` (an unknown id: none)."""
        tenant = self.tenants.get(ns_id)
        if tenant is None:
            row = self.session.execute("SELECT namespace_tenant(%s)", (ns_id,)).fetchone()
            tenant = "" if row is None or row[0] is None else str(row[0])
            if tenant:
                self.tenants[ns_id] = tenant
        self.session.use_tenant(tenant)
        if self.writing:
            self.lock_ns(ns_id)
        return self

    def tenant(self, tenant_id: str) -> Scope:
        """Scope the next statements to `tenant_id`."""
        self.session.use_tenant(tenant_id)
        return self

    def every_tenant(self) -> AbstractContextManager[None]:
        """The statements of the block see every tenant (upkeep only)."""
        return self.session.all_tenants()

    def execute(self, sql: str, params: Params = ()) -> Cursor[TupleRow]:
        """Run one statement in the current scope."""
        return self.session.execute(sql, params)

    def executemany_returning(self, sql: str, rows: Sequence[Params]) -> list[TupleRow]:
        """One statement a row, pipelined, in the current scope; each statement's first row."""
        return self.session.executemany_returning(sql, rows)

    def rows(self, sql: str, params: Params = ()) -> list[TupleRow]:
        """Every row of one statement."""
        return list(self.session.execute(sql, params).fetchall())

    def one(self, sql: str, params: Params = ()) -> TupleRow | None:
        """The first row of one statement, or None."""
        return self.session.execute(sql, params).fetchone()

    def lock_ns(self, ns_id: int) -> None:
        """Serialise writers of one namespace until commit: vector ids then commit in id order
        within a slot, and the namespace's statistics are updated by one writer at a time.

        Taken before the write's first statement about the namespace (`writing`): a writer
        that changed a row first would hold the namespace's row (the generation trigger)
        while waiting for the lock another writer holds while waiting for that row.
        """
        if ns_id not in self._locked:
            self.execute("SELECT pg_advisory_xact_lock(%s::integer, %s::integer)", (NS_LOCK, ns_id))
            self._locked.add(ns_id)

    def iter_rows(self, sql: str, params: Params = ()) -> Iterator[TupleRow]:
        """The rows of one statement, one at a time."""
        yield from self.session.execute(sql, params)
