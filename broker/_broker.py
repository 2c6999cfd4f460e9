"""ContextBroker: assembles one turn's context from three contributors under the budgets.

Contributors, one per kind, no parallel authority path:

- `user`: the active task block (never evicted); its description and status come from the
  TaskStateRepository, the one authority on tasks.
- `memory`: the ONLY memory contributor. It asks the selector once, keyed ONLY on the active
  task: its description, plus the turn's `message` (the active task's latest user message)
  when there is one — never on history or past-task text — and renders each selected memory
  as quoted data under its block name. A closed or failing selector makes it abstain: zero
  memory blocks, and the trace says why.
- `history`: the completed tasks the selector found relevant to this turn's task (the
  `past_tasks` source: a past task clears the one floor like a memory, or stays out), each
  confirmed completed by the TaskStateRepository with its bodies from the
  ConversationStateRepository, every past user turn labelled as context.

One turn, in order: the absolute deadline is computed once (`Turn.deadline`, else the
selector's, from the start of `assemble`); the task read, the selection (`TurnRequest`) and
the history read all stop at it. Then `_render` renders and prices every block, `_admission`
admits them under the budgets, the block table (`_blocks`) orders them, and `_trace` makes
the `turn.completed` event.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import attrs

from . import _admission, _render
from ._blocks import HISTORY_BLOCK
from ._exceptions import BrokerClosedError, ConfigError, ValidationError
from ._fields import NON_NEGATIVE
from ._floor import RECALL_MIN_SCORE
from ._model import Context, PastTask, SelectionResult, Turn, TurnRequest, context_order
from ._observe import observed
from ._tokens import EstimatingTokenCounter as DefaultTokenCounter
from ._trace import TURN_COMPLETED, BlockTrace, TurnFacts, TurnTrace
from .log import get_logger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from ._model import Namespace, SelectedBlock
    from .abc import (
        ConversationStateRepository,
        Selector,
        TaskRecord,
        TaskStateRepository,
        TokenCounter,
        TurnObserver,
        TurnRecorder,
    )

logger = get_logger(__name__)


@attrs.frozen(kw_only=True)
class _Memories:
    selection: SelectionResult | None
    elapsed_ms: float | None
    unavailable: str | None


@attrs.frozen(kw_only=True)
class _History:
    tasks: tuple[PastTask, ...]
    unavailable: str | None


@attrs.frozen(kw_only=True)
class _Settings:
    """How a broker renders and budgets every turn (`open_broker`'s options)."""

    counter: TokenCounter
    memory_budget: int | None
    history_limit: int
    include_text: bool


@attrs.define(eq=False)
class ContextBroker:
    """Assembles each turn's context. Get one from `open_broker`; one `assemble` per turn."""

    _selector: Selector
    _tasks: TaskStateRepository
    _conversations: ConversationStateRepository
    _settings: _Settings
    _observer: TurnObserver | None = None
    _closed: bool = attrs.field(default=False, init=False)

    @property
    def closed(self) -> bool:
        """True after `open_broker` exited."""
        return self._closed

    async def assemble(self, turn: Turn) -> Context:
        """Assemble the turn's context and emit its `turn.completed` event.

        Raises ValidationError if the task is unknown or not active, TimeoutError if it cannot
        be read before the turn's deadline, BrokerClosedError after close. A memory or history
        problem never raises: that contributor abstains. An observer that raises is logged
        (`observer.failed`) and never fails the turn.
        """
        if self._closed:
            raise BrokerClosedError("the context broker is closed")
        with observed(self._observer, turn) as recorder:
            context = await self._assemble(turn, recorder)
            recorder.completed(context)
        return context

    async def _assemble(self, turn: Turn, recorder: TurnRecorder) -> Context:
        start = anyio.current_time()
        # One absolute deadline, from the start of the turn: the task read is part of it.
        deadline = start + (self._selector.deadline if turn.deadline is None else turn.deadline)
        with _before(deadline):
            task = await self._active_task(turn)
        memories = await self._memory(turn, task, deadline)
        if memories.selection is not None and memories.elapsed_ms is not None:
            recorder.selection(memories.selection, elapsed_ms=memories.elapsed_ms)
        # History reads only the past tasks the selection found relevant, in what is left.
        history = await self._history(turn, deadline, memories)
        context = self._build(turn, task, memories, history, start)
        event = dict(context.trace)
        event.pop("turn_id")
        logger.bind(turn_id=turn.turn_id).info(TURN_COMPLETED, **event)
        return context

    async def _active_task(self, turn: Turn) -> TaskRecord:
        task = await self._tasks.get_task(turn.task_id, namespace=turn.namespace)
        if task is None:
            raise ValidationError.single(
                "task_id", "unknown", f"no task {turn.task_id!r} in {turn.namespace}"
            )
        if task.status != "active":
            raise ValidationError.single(
                "task_id", "not_active", f"task {turn.task_id!r} is {task.status}, not active"
            )
        return task

    async def _memory(self, turn: Turn, task: TaskRecord, deadline: float) -> _Memories:
        """Run the memory contributor: one selection keyed only on the active task (a request
        the selector would refuse, e.g. a task text past `MAX_TEXT_CHARS`, makes it abstain)."""
        start = anyio.current_time()
        try:
            request = TurnRequest(
                task=query_of(task.description, turn.message),
                namespace=turn.namespace,
                deadline=deadline,
                mode=self._selector.mode,
                types=turn.types,
                budget=turn.budget,
                context=turn.context,
            )
            selection = await self._selector.select(request)
        except BrokerClosedError:
            return _Memories(selection=None, elapsed_ms=None, unavailable="selector closed")
        except Exception as exc:  # noqa: BLE001 - fail closed: the contributor abstains
            return _Memories(
                selection=None, elapsed_ms=None, unavailable=f"selector failed: {type(exc).__name__}"
            )
        return _Memories(
            selection=selection, elapsed_ms=1000 * (anyio.current_time() - start), unavailable=None
        )

    async def _history(self, turn: Turn, deadline: float, memories: _Memories) -> _History:
        """Run the history contributor: the past tasks the selector found relevant, confirmed
        completed by the task authority, with their conversations (best first, at most
        `history_limit`), read before the turn's deadline."""
        selection = memories.selection
        picked = [] if selection is None else [b for b in selection.blocks if b.block == HISTORY_BLOCK]
        picked = [b for b in picked if b.entry_id != turn.task_id][: self._settings.history_limit]
        if not picked:
            return _History(tasks=(), unavailable=None)
        try:
            with _before(deadline):
                pasts = [p for b in picked if (p := await self._past(b, turn.namespace)) is not None]
        except TimeoutError:
            return _History(tasks=(), unavailable="history timeout")
        except Exception as exc:  # noqa: BLE001 - fail closed: no history this turn
            return _History(tasks=(), unavailable=f"history failed: {type(exc).__name__}")
        return _History(tasks=tuple(pasts), unavailable=None)

    async def _past(self, block: SelectedBlock, namespace: Namespace) -> PastTask | None:
        """A selected past task with its turns, if the task authority confirms it completed."""
        past = await self._tasks.get_task(block.entry_id, namespace=namespace)
        if past is None or past.status != "completed":
            return None
        turns = await self._conversations.turns(past.task_id, namespace=namespace)
        return PastTask(task=past, turns=tuple(turns), selected=block)

    def _build(
        self, turn: Turn, task: TaskRecord, memories: _Memories, history: _History, start: float
    ) -> Context:
        chosen = memories.selection.blocks if memories.selection is not None else ()
        selected = tuple(b for b in chosen if b.block != HISTORY_BLOCK)
        memory_budget = self._memory_budget_for(turn)
        cut_to = _render.cuts(selected, history.tasks, memory_budget, turn.input_budget)
        blocks = _render.render_blocks(
            task, selected, history.tasks, cut_to=cut_to, counter=self._settings.counter
        )
        admission = _admission.admit(blocks, memory_budget=memory_budget, input_budget=turn.input_budget)
        admitted = context_order(admission.admitted)
        facts = TurnFacts(
            turn_id=turn.turn_id,
            task_id=turn.task_id,
            namespace=turn.namespace,
            total_ms=1000 * (anyio.current_time() - start),
            selection_ms=memories.elapsed_ms,
            selection=memories.selection,
            memory_unavailable_reason=memories.unavailable,
            admitted=tuple(BlockTrace.of(b) for b in admitted),
            dropped=tuple(BlockTrace.of(d.block, reason=d.reason) for d in admission.dropped),
            memory_budget=admission.memory_budget,
            input_budget=turn.input_budget,
            task_over_budget=admission.task_over_budget,
            floor=RECALL_MIN_SCORE,
            query_has_message=turn.message is not None,
            history_selected=_history_cleared(memories.selection, len(chosen) - len(selected)),
            history_unavailable_reason=history.unavailable,
            task_text=task.description,
        )
        return Context(
            blocks=admitted, trace=TurnTrace(facts=facts, include_text=self._settings.include_text)
        )

    def _memory_budget_for(self, turn: Turn) -> int:
        if turn.memory_budget is not None:
            return turn.memory_budget
        if self._settings.memory_budget is not None:
            return self._settings.memory_budget
        return _admission.default_memory_budget(turn.window)

    def _close(self) -> None:
        self._closed = True


@contextlib.contextmanager
def _before(deadline: float) -> Iterator[None]:
    """Run the body until the turn's absolute `deadline`; raise TimeoutError if it was cut."""
    with anyio.CancelScope(deadline=deadline) as scope:
        yield
    if scope.cancelled_caught:
        raise TimeoutError


def _history_cleared(selection: SelectionResult | None, selected: int) -> int:
    """Past tasks that cleared the floor: the selector's tally, or (a selection built by hand
    without one) those selected."""
    if selection is None or selection.memories is None:
        return selected
    return selection.history.cleared


def query_of(description: str, message: str | None) -> str:
    """The selection query of a turn: the active task, and its latest user message if any."""
    return description if message is None else f"{description}\n{message}"


def _check_options(memory_budget: object, history_limit: object, observer: object) -> None:
    problems = [
        *NON_NEGATIVE.optional().problem("memory_budget", memory_budget),
        *NON_NEGATIVE.problem("history_limit", history_limit),
    ]
    if observer is not None and not callable(getattr(observer, "turn", None)):
        problems.append("observer must be a broker.abc.TurnObserver (with a turn() method)")
    if problems:
        raise ConfigError("; ".join(problems))


@contextlib.asynccontextmanager
async def open_broker(  # noqa: PLR0913 - keyword-only wiring with defaults
    *,
    selector: Selector,
    tasks: TaskStateRepository,
    conversations: ConversationStateRepository,
    token_counter: TokenCounter | None = None,
    memory_budget: int | None = None,
    history_limit: int = 5,
    include_text: bool = False,
    observer: TurnObserver | None = None,
) -> AsyncIterator[ContextBroker]:
    """Yield a ContextBroker over an opened selector and the task repositories.

    The broker does not own them: open the selector (`open_selector`) around this. On exit
    the broker refuses further turns (BrokerClosedError). `memory_budget` (tokens) replaces
    the default `min(1200, window // 8)`; the input budget of each turn bounds it further.
    `include_text=True` puts memory and task text into trace events (logs leave the
    process: off by default). `observer` watches every turn (e.g.
    `context_broker.otel.OpenTelemetryObserver`). Raises ConfigError on bad options.
    """
    _check_options(memory_budget, history_limit, observer)
    settings = _Settings(
        counter=token_counter if token_counter is not None else DefaultTokenCounter(),
        memory_budget=memory_budget,
        history_limit=history_limit,
        include_text=include_text,
    )
    broker = ContextBroker(selector, tasks, conversations, settings, observer)
    try:
        yield broker
    finally:
        broker._close()  # noqa: SLF001 - the context manager owns its broker
