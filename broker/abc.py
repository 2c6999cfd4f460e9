"""Protocols the broker consumes; `sources` implements them, the broker never imports it."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from ._fields import RECALL_MODES
from ._model import Candidate, Namespace, SelectionResult, SessionContext, TurnRequest

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ._model import Context, Turn


@attrs.frozen(kw_only=True)
class SourceRequest:
    """What a source is asked in one turn. Sources take no timeout: the caller owns time."""

    task: str
    namespace: Namespace
    types: tuple[str, ...] | None = None
    limit: int = 10
    context: SessionContext | None = None
    mode: str | None = None
    """The recall mode: a selector always sets the one it resolved (`MemorySelector.mode`);
    None only when a source is asked directly, and then it runs its own default."""


@runtime_checkable
class Source(Protocol):
    """A memory source: opened once, asked once per turn, closed once."""

    @property
    def name(self) -> str:
        """The stable name shown in traces (`store`, `neurons`, ...)."""
        ...

    async def open(self) -> None:
        """Acquire resources (connections, models) before any turn's deadline runs."""
        ...

    async def aclose(self) -> None:
        """Release every resource; no statement runs after this returns."""
        ...

    async def fetch(self, request: SourceRequest) -> Sequence[Candidate]:
        """Return scored candidates for the task; may raise, never swallows cancellation.

        Must never block the event loop: every source of a turn shares it, so a blocking
        call here (`time.sleep`, a query or model run outside a worker thread) makes the
        healthy sources of the same turn miss the deadline. Run blocking work with
        `anyio.to_thread.run_sync`; `broker.testing.check_source_never_blocks` checks it.
        What it returns is checked by `broker.validate_candidate`: a malformed candidate
        fails this source for the turn, and a text is cut to `MAX_TEXT_CHARS`.
        """
        ...


@runtime_checkable
class ModalSource(Protocol):
    """A source that says which recall mode it runs when a request names none (a store's
    sources: their store's). A selector opened without `mode=` takes it, so the mode the
    sources run and the mode the trace reports are one."""

    @property
    def default_mode(self) -> str:
        """One of `RECALL_MODES`."""
        ...


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors."""

    @property
    def model_id(self) -> str:
        """A stable id of the model and its weights; a change means re-embedding."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed texts as a (len(texts), dim) float32 array of unit rows. Blocking."""
        ...


class TokenCounter(Protocol):
    """Counts model tokens in a text; used for every budget decision."""

    def count(self, text: str) -> int:
        """Tokens in `text` (an estimate is fine if its error is documented)."""
        ...


@attrs.frozen(kw_only=True)
class TaskRecord:
    """A task as its repository knows it; the repository is the one authority on status."""

    task_id: str
    description: str
    status: str
    created_at: str
    updated_at: str


@attrs.frozen(kw_only=True)
class ConversationTurn:
    """One stored conversation turn of a task."""

    task_id: str
    role: str
    text: str
    created_at: str


class TaskStateRepository(Protocol):
    """The one authority on tasks and their status."""

    async def get_task(self, task_id: str, *, namespace: Namespace) -> TaskRecord | None:
        """The task, or None if unknown in this namespace."""
        ...

    async def completed_tasks(self, *, namespace: Namespace, limit: int) -> Sequence[TaskRecord]:
        """Completed tasks, newest first."""
        ...


class ConversationStateRepository(Protocol):
    """Conversation bodies of tasks."""

    async def turns(self, task_id: str, *, namespace: Namespace) -> Sequence[ConversationTurn]:
        """The task's turns, oldest first."""
        ...


class Selector(Protocol):
    """What the broker needs of a selector (`MemorySelector` is one): the defaults of a turn
    that names none, and one selection per turn's request."""

    @property
    def deadline(self) -> float:
        """Seconds a turn that names no deadline of its own may take."""
        ...

    @property
    def mode(self) -> str:
        """The recall mode a request that names none runs in."""
        ...

    async def select(self, request: TurnRequest) -> SelectionResult:
        """Select memories for the request (may abstain)."""
        ...


class TurnRecorder(Protocol):
    """Told what one turn did, as it happens. An exception it raises is logged
    (`observer.failed`) and the turn goes on: an observer never fails a turn."""

    def selection(self, result: SelectionResult, *, elapsed_ms: float) -> None:
        """The memory selection just returned, after `elapsed_ms`; `result.sources` has each source's part."""
        ...

    def completed(self, context: Context) -> None:
        """The turn is assembled; `context.trace` is its `turn.completed` event."""
        ...


class TurnObserver(Protocol):
    """Watches every turn of a broker (`open_broker(observer=...)`), e.g. to trace it.

    `turn` is entered in the caller's task when the turn starts and exited when it ends (with
    the turn's exception, if any), so an observer can open a span under the caller's own.
    The broker imports no tracing library: adapters live with the host (see
    `context_broker.otel`).
    """

    def turn(self, turn: Turn) -> AbstractContextManager[TurnRecorder]:
        """A context manager around the turn, giving the recorder the broker reports to."""
        ...


__all__ = [
    "RECALL_MODES",
    "Candidate",
    "ConversationStateRepository",
    "ConversationTurn",
    "Embedder",
    "ModalSource",
    "Namespace",
    "Selector",
    "SessionContext",
    "Source",
    "SourceRequest",
    "TaskRecord",
    "TaskStateRepository",
    "TokenCounter",
    "TurnObserver",
    "TurnRecorder",
]
