"""The memory store: namespaced, typed entries in one SQLite file, with calibrated recall.

Recall has three modes (lexical, dense, hybrid), all on the one scale of `sources.relevance._relevance`.

Vectors. A store opened with an embedder (the default unless mode="lexical") embeds every
entry at write time, in batches and before taking the write lock, and stores the vector
with the model id in the same transaction as the row. A store without an embedder writes
no vectors, and asking it for a dense mode is a ConfigError (the model is never loaded
behind a caller's back, inside a turn's deadline). Vectors made by another model are stale:
dense search ignores them, a lexical candidate without a current vector is embedded on the
fly so it is still scored, and `reindex` re-embeds them. (A namespace with no current vector
at all has no best cosine to stand against, so until `reindex` no text gains that standing.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Self, Unpack

import attrs

from broker import (
    ConfigError,
    Namespace,
    ValidationError,
)
from broker.log import get_logger

from . import _entry_recall
from ._exceptions import StoreError
from ._singleflight import SingleFlight
from ._targets import redacted, store_target
from .embedding._checked import checked
from .relevance import _offtopic
from .relevance._reference import Indexes, compute_reference, lexical_hits
from .relevance._relevance import DENSE_MODES, QueryProfile, Reference, check_mode, profile
from .relevance._scorer import Scorer
from .storage import _upkeep, _validate, _vectors
from .storage._engine import CORPORA, CORPUS_ENTRIES, Slot
from .storage._entries import (
    MEMORULE_OWNED,
    EntryRow,
    Memory,
    NewEntry,
    Recalled,
    RecallOptions,
)
from .storage._entry_writes import batch_rows, derived_id, insert_rows, stored_texts
from .storage._lane import ReadLane
from .storage._runs import LexicalRun
from .storage._sqlite import SqliteEngine
from .storage._text_index import TextIndex

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt

    from broker.abc import Embedder

    from .storage._engine import Engine, Reader, Writer

Progress = Callable[[int, int], None]
"""progress(done, total), called after each embedded batch."""

logger = get_logger(__name__)

_REFERENCES_KEPT: Final = 64  # recent (namespace, task) references (their matches packed in arrays)
EMBED_BATCH: Final = 256
"""Texts embedded per batch at write time and by `reindex` (one progress call each)."""


@attrs.define(eq=False)
class MemoryStore:
    """Namespaced memories in one store (a storage engine: `sources.storage._engine.Engine`).

    Blocking and thread-safe: async callers run its methods in worker threads.
    """

    engine: Engine
    embedder: Embedder | None = attrs.field(default=None, converter=checked)
    """The model that embeds the store's texts and queries, behind a check of what it returns
    (`sources.embedding._checked`: an `EmbedderError` rather than a vector no search could use)."""
    mode: str = "hybrid"
    _vindex: _vectors.VectorIndex | None = None
    _references: SingleFlight[tuple[int, str, int, str], Reference] = attrs.field(
        factory=lambda: SingleFlight(size=_REFERENCES_KEPT), init=False
    )
    _profiles: SingleFlight[tuple[int, str, int], QueryProfile] = attrs.field(
        factory=lambda: SingleFlight(size=_REFERENCES_KEPT), init=False
    )
    _lexical: SingleFlight[tuple[int, str, int], tuple[LexicalRun, ...]] = attrs.field(
        factory=lambda: SingleFlight(size=_REFERENCES_KEPT), init=False
    )
    _texts: TextIndex = attrs.field(factory=TextIndex, init=False)
    _lane: ReadLane = attrs.field(init=False)

    @_lane.default
    def _new_lane(self) -> ReadLane:
        return ReadLane(self.engine.read_threads)

    @classmethod
    def open(
        cls,
        path: Path | str,
        *,
        embedder: Embedder | None = None,
        mode: str = "hybrid",
        create: bool = True,
        durability: str = "normal",
    ) -> MemoryStore:
        """Open (or create) the SQLite store at `path` (a path or a `sqlite:///` URL); StoreError
        if the file is unusable, ConfigError for what names no SQLite file (`store_target`): a
        PostgreSQL URL (`sources.open_store` opens those), another URL scheme, a libpq
        connection string, `:memory:` or a `file:` URI, a NUL character, a non-string.

        `mode` is the default recall mode. Dense and hybrid modes need an embedder: without
        one the process-wide default model is loaded here (blocking, about 0.2 s; async
        callers open the store in a worker thread, before any deadline). mode="lexical"
        loads no model; given an embedder it still writes vectors (so switching to hybrid
        later needs no reindex), without one it writes none.

        `create=False` refuses a missing file (StoreError) instead of creating it. Another
        program's database, or one of a newer schema, is refused before anything is written.
        `durability` is "normal" (the default: WAL, synchronous=NORMAL; a commit survives a
        crash of the process, the last ones may not survive a power loss) or "full"
        (synchronous=FULL: every acknowledged commit survives a power loss too).
        """
        mode = check_mode(mode)
        target = store_target(path)
        if isinstance(target, str):
            msg = f"{redacted(target)}: MemoryStore.open opens SQLite files; PostgreSQL: open_store(url)"
            raise ConfigError(msg)
        return cls.on(
            SqliteEngine.open(target, create=create, durability=durability), embedder=embedder, mode=mode
        )

    @classmethod
    def on(cls, engine: Engine, *, embedder: Embedder | None = None, mode: str = "hybrid") -> MemoryStore:
        """The store over an open engine, which it then owns (closes); see `open` for `mode`."""
        mode = check_mode(mode)
        if embedder is None and mode in DENSE_MODES:
            from .embedding._embedder import load_default_embedder  # noqa: PLC0415 - lexical stores never import onnxruntime

            try:
                embedder = load_default_embedder()
            except BaseException:
                engine.close()
                raise
        return cls(engine=engine, embedder=embedder, mode=mode)

    @property
    def db(self) -> Engine:
        """The store's engine (its older name)."""
        return self.engine

    def __attrs_post_init__(self) -> None:
        if self._vindex is None and self.embedder is not None:
            self._vindex = _vectors.VectorIndex(
                model_id=self.embedder.model_id,
                dim=self.embedder.dim,
                graphs=self.engine.vector_dir,
            )
        if self.embedder is not None and self.mode in DENSE_MODES:
            _offtopic.warm(self.embedder)  # the gate reads it in every turn: never cold inside one

    @property
    def read_lane(self) -> ReadLane:
        """The worker threads its sources read in (`Engine.read_threads` of them, `sources.storage._lane`)."""
        return self._lane

    @property
    def texts(self) -> TextIndex:
        """The store's in-memory text indexes (`sources.storage._postings`), built by `warm`."""
        return self._texts

    @property
    def vindex(self) -> _vectors.VectorIndex | None:
        """The store's in-memory vector index (None without an embedder)."""
        return self._vindex

    def warm(self, *, namespaces: Iterable[Namespace] | None = None) -> None:
        """Load what a first turn would otherwise load inside its deadline; blocking.

        The in-memory text index of every namespace (or of `namespaces`; `sources.storage._postings`)
        and, with an embedder, one embedding run (the model's first is slow), the vector
        matrices of every corpus and their HNSW graphs. Idempotent: a warm index or matrix only
        catches up with the writes since. Each namespace is read in a snapshot of its own and
        its graphs are built after it, so no read stays open for the whole warm. The selector's
        sources call it when they open (`StoreReader.warm`); a host that writes much between
        opening and its first turn may call it again.
        """
        if self.embedder is not None:
            self.embedder.embed(["warm"])
        with self.engine.read() as conn:
            if namespaces is None:
                ids = list(conn.namespace_ids())
            else:
                found = (conn.namespace_id(ns) for ns in namespaces)
                ids = [i for i in found if i is not None]
        for ns_id in ids:
            self._warm_namespace(ns_id)
            self._learn_types(ns_id)

    def _warm_namespace(self, ns_id: int) -> None:
        vindex = self._vindex
        with self.engine.read() as conn:
            self._texts.warm(conn, ns_id)
            if vindex is not None:
                for corpus in CORPORA:
                    vindex.load(conn, Slot(ns_id, corpus))
        if vindex is not None:
            vindex.open_graph(ns_id)

    def _learn_types(self, ns_id: int) -> None:
        """The entries' memory types for the text index (`TextIndex.learn_types`), in a read of
        their own: a damaged entries table leaves them unknown, and warm goes on."""
        try:
            with self.engine.read() as conn:
                self._texts.learn_types(conn, ns_id)
        except StoreError as exc:
            logger.warning("store.text_index.types_unread", ns_id=ns_id, error=str(exc))

    def refresh_statistics(self) -> None:
        """Refresh the engine's planner statistics after a bulk load (`Engine.refresh_statistics`:
        ANALYZE on PostgreSQL, nothing on SQLite); `context-broker ingest` calls it. Blocking."""
        self.engine.refresh_statistics()

    def close(self) -> None:
        """Save the HNSW graphs that changed (large namespaces, `sources.storage._ann`); close every
        connection."""
        self._lane.close()
        if self._vindex is not None and not self.engine.closed:
            self._vindex.persist()
        self.engine.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -------------------------------------------------------------------------

    def add_entry(  # noqa: PLR0913 - the documented API
        self,
        text: str,
        *,
        namespace: Namespace,
        kind: str = "note",
        memory_type: str | None = None,
        id: str | None = None,  # noqa: A002 - the documented API name
        importance: float = 0.5,
        created_at: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        replace: bool = False,
        dedupe: bool = True,
    ) -> str:
        """Write one memory; returns its id. An existing id is an error unless `replace`.

        Without an id, the text is the identity (see `add_entries`): the same text again
        returns the id already stored, unless `dedupe=False`.
        """
        entry = NewEntry(
            text=text,
            kind=kind,
            memory_type=memory_type,
            id=id,
            importance=importance,
            created_at=created_at,
            metadata=metadata,
        )
        return self.add_entries([entry], namespace=namespace, replace=replace, dedupe=dedupe)[0]

    def add_entries(
        self,
        entries: Iterable[NewEntry],
        *,
        namespace: Namespace,
        replace: bool = False,
        progress: Progress | None = None,
        dedupe: bool = True,
    ) -> list[str]:
        """Write many memories in one transaction: all or nothing; returns their ids in order.

        An entry without an id gets one derived from its text (`content_id`), so identical
        text is stored once per namespace: written again (in the batch, or later) it returns
        the id already stored and writes nothing; with `replace` the stored one is rewritten.
        `dedupe=False` gives such entries a fresh random id each time instead.

        With an embedder, the texts are embedded first, in batches (`progress(done, total)`
        after each), outside the write lock; the vectors go in the same transaction.
        """
        rows, ids = batch_rows(_validate.batch_of(entries, NewEntry, namespace), dedupe=dedupe)
        if not replace and any(map(derived_id, rows)):
            # Texts already stored need no embedding, nor the write lock when all are. Only a
            # text-derived id can name one: notes with ids open no read transaction first.
            with self.engine.read() as conn:
                stored = stored_texts(conn, conn.namespace_id(namespace), rows)
            rows = [r for r in rows if r.id not in stored]
        if not rows:  # nothing new to write: no write, no namespace created
            return ids
        vectors = self._embed([r.text for r in rows], progress)
        with self.engine.write() as conn:
            ns_id = conn.ensure_namespace(namespace)
            stored = set() if replace else stored_texts(conn, ns_id, rows)  # written meanwhile
            kept = [i for i, r in enumerate(rows) if r.id not in stored]
            rowids = self.insert_rows(conn, ns_id, namespace, [rows[i] for i in kept], replace=replace)
            if vectors is not None and self.embedder is not None and kept:
                conn.store_vectors(Slot(ns_id, CORPUS_ENTRIES), rowids, vectors[kept], self.embedder.model_id)
        return ids

    def _embed(self, texts: Sequence[str], progress: Progress | None) -> npt.NDArray[np.float32] | None:
        if self.embedder is None or not texts:
            return None
        import numpy as np  # noqa: PLC0415 - only stores with an embedder need it

        # Shortest first across the whole write, so every batch holds texts of about one length
        # and pads little (per call, the embedder could only sort within EMBED_BATCH texts).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.embedder.dim), dtype=np.float32)
        for start in range(0, len(order), EMBED_BATCH):
            rows = order[start : start + EMBED_BATCH]
            out[rows] = self.embedder.embed([texts[i] for i in rows])
            if progress is not None:
                progress(min(start + EMBED_BATCH, len(texts)), len(texts))
        return out

    @staticmethod
    def insert_row(conn: Writer, ns_id: int, ns: Namespace, row: EntryRow, *, replace: bool) -> int:
        """Insert one row and index it, in the caller's write; its rowid (`insert_rows`)."""
        return MemoryStore.insert_rows(conn, ns_id, ns, [row], replace=replace)[0]

    @staticmethod
    def insert_rows(
        conn: Writer, ns_id: int, ns: Namespace, rows: Sequence[EntryRow], *, replace: bool
    ) -> list[int]:
        """Insert rows (distinct ids) and index them, in the caller's write; their rowids
        (`sources.storage._entry_writes.insert_rows`)."""
        return insert_rows(conn, ns_id, ns, rows, replace=replace)

    def delete(self, id: str, *, namespace: Namespace) -> bool:  # noqa: A002
        """Remove a memory from every index; returns whether it existed."""
        with self.engine.write() as conn:
            ns_id = conn.namespace_id(namespace)
            found = None if ns_id is None else conn.entries.find(ns_id, id)
            if ns_id is None or found is None:
                return False
            if found[1] == "memorule":
                raise ValidationError.single("id", "is_memorule", MEMORULE_OWNED)
            conn.entries.delete(ns_id, found[0])
        return True

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Embed every row whose vector is missing, made by another model, or of another length
        than the model's (damaged); return how many.

        Covers entries, facts and knowledge of every namespace, in batches of EMBED_BATCH.

        Each batch is read, embedded outside the write lock, then written in a short
        transaction that skips rows deleted or changed meanwhile. Safe to interrupt and rerun.
        Leaves the store warm (`warm`): matrices reloaded, large namespaces' graphs rebuilt.
        """
        embedder = self.require_embedder("reindex")
        todo = _upkeep.unembedded(self.engine, embedder.model_id, embedder.dim)
        total, done = sum(len(v) for v in todo.values()), 0
        for corpus, rowids in todo.items():
            for start in range(0, len(rowids), EMBED_BATCH):
                done += _upkeep.reindex_batch(
                    self.engine, embedder, corpus, rowids[start : start + EMBED_BATCH]
                )
                if progress is not None:
                    progress(done, total)
        if self._vindex is not None:
            self._vindex.invalidate()
        self._references.clear()
        self._profiles.clear()
        self._lexical.clear()
        self.warm()
        logger.info("store.reindexed", vectors=done, model_id=embedder.model_id)
        return done

    def vector_status(self, *, namespace: Namespace | None = None) -> dict[str, int]:
        """Count entries by vector state.

        `current`: a vector of this store's model and dimension; `stale`: of another model, or of
        another length (damaged: `reindex` embeds them again); `missing`: none.
        """
        if self.embedder is None:
            return _upkeep.vector_status(self.engine, "", 0, namespace)
        return _upkeep.vector_status(self.engine, self.embedder.model_id, self.embedder.dim, namespace)

    def require_embedder(self, what: str) -> Embedder:
        """The store's embedder; ConfigError naming `what` needs it when the store has none."""
        if self.embedder is None:
            msg = f"{what} needs an embedder; open the store with mode 'dense' or 'hybrid' (or pass one)"
            raise ConfigError(msg)
        return self.embedder

    # -- reads --------------------------------------------------------------------------

    def get(self, id: str, *, namespace: Namespace) -> Memory | None:  # noqa: A002
        """Return the memory with this id in this namespace, or None."""
        with self.engine.read() as conn:
            row = conn.entries.by_id(namespace, id)
        found = list(_memories([] if row is None else [row]))
        return found[0] if found else None

    def get_many(self, ids: Iterable[str], *, namespace: Namespace) -> dict[str, Memory]:
        """The memories of these ids the namespace holds, by id (absent ids left out), in one read."""
        wanted = list(dict.fromkeys(ids))
        with self.engine.read() as conn:
            ns_id = conn.namespace_id(namespace)
            if ns_id is None or not wanted:
                return {}
            found = conn.entries.find_many(ns_id, wanted)
            rows = conn.entries.rows(ns_id, [rowid for rowid, _ in found.values()])
        return {m.id: m for m in _memories(rows)}

    def list_entries(self, *, namespace: Namespace, limit: int = 100, offset: int = 0) -> list[Memory]:
        """The namespace's memories, oldest first, a page at a time (no relevance: see `recall`)."""
        with self.engine.read() as conn:
            rows = conn.entries.page(namespace, limit=max(limit, 0), offset=max(offset, 0))
        return [Memory.from_row(r) for r in rows]

    def recall(self, query: str, *, namespace: Namespace, **options: Unpack[RecallOptions]) -> list[Recalled]:
        """Return memories relevant to `query`, best first, scored at or above `min_score`.

        Options (`RecallOptions`): `types` (typed queries include unclassified memories),
        `limit` (10), `min_score` (`RECALL_MIN_SCORE`), `mode` (lexical | dense | hybrid; the
        store's by default). Each score is a calibrated probability of relevance.
        ValidationError for a bad option value or an unknown mode, ConfigError for a dense
        mode on a store without an embedder, TypeError for an unknown option.
        """
        with self.engine.read() as conn:
            return self.recall_on(conn, query, namespace=namespace, **options)

    recall_on = _entry_recall.recall_on
    """`recall` on a reader connection the caller holds (`sources._entry_recall.recall_on`)."""

    def scorer(self, conn: Reader, query: str, *, namespace: Namespace, mode: str | None = None) -> Scorer:
        """Build a `Scorer` of `query` against a namespace in `mode` (default: the store's).

        Other sources score their texts with it, on the store's scale.
        """
        mode = check_mode(self.mode if mode is None else mode)
        ns_id = conn.namespace_id(namespace)
        return self.scorer_on(conn, ns_id, query, mode=mode)

    def profile_on(self, conn: Reader, ns_id: int | None, query: str) -> QueryProfile:
        """`sources.relevance._relevance.profile` of a query in a namespace, computed once per
        write generation of the namespace and shared by every source of a turn (one generation
        read when it is kept)."""
        if ns_id is None:
            return profile(conn, ns_id, query)
        generation = conn.generation(ns_id)
        return self._profiles.get(
            (ns_id, query, generation), lambda: profile(conn, ns_id, query, self._texts)
        )

    def lexical_on(self, conn: Reader, ns_id: int, query: str) -> tuple[LexicalRun, ...]:
        """The query's lexical retrieval in namespace `ns_id` (`sources.relevance._reference.lexical_hits`),
        computed once per write generation of the namespace like its profile. A hybrid turn
        starts it while the task is embedded (`StoreReader.embed_ahead`); its reference
        (`scorer_on`) then reads it."""
        prof = self.profile_on(conn, ns_id, query)
        return self._lexical.get(
            (ns_id, query, prof.generation), lambda: lexical_hits(conn, ns_id, prof, self._texts)
        )

    def scorer_on(
        self,
        conn: Reader,
        ns_id: int | None,
        query: str,
        *,
        mode: str,
        embedder: Embedder | None = None,
    ) -> Scorer:
        """Build the `Scorer` of a query in namespace `ns_id` (its profile: `profile_on`), in `mode`.

        It carries the namespace's `Reference` for the query (its best evidence over every
        corpus, its candidates' standing and the task's gate), computed once and shared by
        every source that scores the query in the namespace. Without one (an empty namespace,
        a query without an informative term) every score is 0. `embedder` may be a caching
        wrapper of the store's own.
        """
        prof = self.profile_on(conn, ns_id, query)
        scorer = Scorer.build(prof, query, mode=mode, embedder=embedder or self.embedder)
        if ns_id is None or not prof.terms:
            return scorer
        key = (ns_id, query, prof.generation, mode)
        ref = self._references.get(key, lambda: self._reference(conn, ns_id, scorer))
        return attrs.evolve(scorer, reference=ref)

    def _reference(self, conn: Reader, ns_id: int, scorer: Scorer) -> Reference:
        # Only a hybrid turn retrieves ahead (while it embeds); lexical and dense ones need no cache.
        hits = self.lexical_on(conn, ns_id, scorer.query) if scorer.mode == "hybrid" else None
        return compute_reference(conn, ns_id, scorer, Indexes(self._vindex, self._texts), hits=hits)

    def stats(self, *, namespace: Namespace | None = None) -> dict[str, Any]:
        """Return counts per namespace and kind, schema version, file size."""
        return _upkeep.stats(self.engine, namespace)


def _memories(rows: Iterable[Sequence[Any]]) -> Iterator[Memory]:
    """Memories of entry rows, skipping (and logging) damaged ones."""
    return _validate.skip_damaged(rows, Memory.from_row, table="entries", row_id=lambda r: r[1])
