"""Many writers on one PostgreSQL database: statistics stay exact, vector ids appear in
commit order, and a writer killed inside a memorule write leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
from pg_server import require

from broker import Namespace
from sources.storage import _analysis
from sources.storage._engine import CORPUS_ENTRIES, Slot
from sources.storage._entries import EntryRow
from sources.storage._postgres._engine import PostgresEngine

require("psycopg")

ALICE = Namespace(tenant_id="alice")
WRITERS = 4
WRITES = 40
TEXTS = (
    "coffee beans from Lyon",
    "piano scales piano",
    "train delayed forty minutes",
    "basil on the balcony",
)


def _writer(url: str, w: int, errors: list[BaseException]) -> None:
    """One process's worth of writes: an entry, its index terms and its vector, per write."""
    engine = PostgresEngine.open(url, migrate=False, connections=1)
    try:
        for i in range(WRITES):
            text = TEXTS[(w + i) % len(TEXTS)]
            with engine.write() as tx:
                ns_id = tx.ensure_namespace(ALICE)
                row = EntryRow(
                    id=f"w{w}-{i}",
                    kind="note",
                    memory_type=None,
                    text=text,
                    created_at="2026",
                    importance=0.5,
                    metadata="{}",
                )
                # The vector first: its id is drawn before any other statement of the write
                # could hold the namespace's row (the generation trigger), so only the
                # namespace's lock keeps the ids in commit order.
                rowid = 1_000_000 * (w + 1) + i
                tx.store_vectors(Slot(ns_id, CORPUS_ENTRIES), [rowid], np.ones((1, 384), np.float32), "m")
                rowid = tx.entries.insert(ns_id, ALICE, row)
                tx.index_document(ns_id, (CORPUS_ENTRIES, rowid), _analysis.terms(text))
    except BaseException as exc:
        errors.append(exc)
    finally:
        engine.close()


def _follow(engine: PostgresEngine, done: threading.Event, seen: list[int]) -> None:
    """Poll the slot's new vectors (`after` the largest id seen) until the writers are done."""
    while True:
        finished = done.is_set()
        with engine.read() as r:
            ns_id = r.namespace_id(ALICE)
            if ns_id is not None:
                after = max(seen, default=0)
                seen += [v.vector_id for v in r.vector_rows(Slot(ns_id, CORPUS_ENTRIES), after)]
        if finished:
            return


def test_concurrent_writers_keep_statistics_exact_and_ids_in_commit_order(pg_url: str) -> None:
    """Writers racing on one namespace (its creation included) lose no write, keep the term
    statistics equal to the documents', and a reader following vector ids misses none."""
    PostgresEngine.open(pg_url).close()
    errors: list[BaseException] = []
    seen: list[int] = []
    done = threading.Event()
    reader = PostgresEngine.open(pg_url, migrate=False, connections=1)
    follower = threading.Thread(target=_follow, args=(reader, done, seen))
    writers = [threading.Thread(target=_writer, args=(pg_url, w, errors)) for w in range(WRITERS)]
    follower.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    follower.join()
    try:
        with reader.read() as r:
            ns_id = r.namespace_id(ALICE)
            assert ns_id is not None
            entries = r.entries.page(ALICE, limit=1000, offset=0)
            docs = r.indexed_terms(ns_id, [(CORPUS_ENTRIES, e.rowid) for e in entries])
            terms = sorted({t for d in docs.values() for t in d})
            stats = r.term_stats(ns_id, terms)
            final = [v.vector_id for v in r.vector_rows(Slot(ns_id, CORPUS_ENTRIES), 0)]
    finally:
        reader.close()
    assert errors == []
    assert len(entries) == len(docs) == WRITERS * WRITES
    assert (stats.n_docs, stats.total_len) == (len(docs), sum(len(d) for d in docs.values()))
    assert dict(stats.df) == {t: sum(t in d for d in docs.values()) for t in terms}
    assert seen == sorted(seen)
    assert seen == final  # no vector committed behind the reader's back


_WRITER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from broker import Namespace
    from sources.storage._engine import CORPUS_ENTRIES, Slot
    from sources.storage._engine_corpora import AuditRecord, StateRecord
    from sources.storage._entries import EntryRow
    from sources.storage._postgres._engine import PostgresEngine

    ns = Namespace(tenant_id="alice")
    engine = PostgresEngine.open(sys.argv[1], migrate=False)
    with engine.write() as w:
        ns_id = w.ensure_namespace(ns)
        row = EntryRow(id="m1", kind="memorule", memory_type=None, text="use tabs", created_at="2026",
                       importance=0.5, metadata="{}")
        rowid = w.entries.insert(ns_id, ns, row)
        w.index_document(ns_id, (CORPUS_ENTRIES, rowid), ["use", "tab"])
        w.store_vectors(Slot(ns_id, CORPUS_ENTRIES), [rowid], np.ones((1, 384), np.float32), "m")
        w.memorules.append_state(rowid, StateRecord("rule", "s", "use tabs", "{}", None, "high", None, None, "2026"))
        print("written", flush=True)
        if sys.argv[2] == "pause":
            time.sleep(60)  # killed here: the memorule is written, its audit event not yet
        w.memorules.append_audit(AuditRecord("m1", "create", None, None, None, "2026", "alice", "default"))
    print("committed", flush=True)
    """
)


def _state(engine: PostgresEngine) -> tuple[int, int, int, int]:
    """(namespaces, memorule states, audit events, vectors) of tenant alice."""
    with engine.read() as r:
        ns_id = r.namespace_id(ALICE)
        if ns_id is None:
            return (0, 0, len(r.memorules.audit(since=None, tenant_id="alice")), 0)
        current = r.memorules.current(ns_id, "m1")
        vectors = r.vector_rows(Slot(ns_id, CORPUS_ENTRIES), 0)
        audit = r.memorules.audit(since=None, tenant_id="alice")
        return (1, 0 if current is None else current.versions, len(audit), len(vectors))


def _run_writer(pg_url: str, *, kill: bool) -> None:
    root = Path(__file__).resolve().parents[4]
    args = [sys.executable, "-c", _WRITER, pg_url, "pause" if kill else "go"]
    with subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=root) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "written"
        if kill:
            os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == (-signal.SIGKILL if kill else 0)


def test_a_writer_killed_inside_a_memorule_write_leaves_nothing(pg_url: str) -> None:
    """SIGKILL between a memorule's state and its audit event: no namespace, entry, state,
    index term or vector of that write is visible, and the same write then succeeds whole."""
    engine = PostgresEngine.open(pg_url)
    try:
        _run_writer(pg_url, kill=True)
        assert _state(engine) == (0, 0, 0, 0)
        _run_writer(pg_url, kill=False)  # the dead writer's locks are gone
        assert _state(engine) == (1, 1, 1, 1)
    finally:
        engine.close()
