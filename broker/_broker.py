"""ContextBroker: assembles one turn's context from three contributors under the budgets.

Contributors, one per kind, no parallel authority path:

- `user`: the active task block (priority 100, never evicted); its description and status
  come from the TaskStateRepository, the one authority on tasks.
- `memory`: the ONLY memory contributor. It asks the selector once, keyed ONLY on the active
  task: its description, plus the turn's `message` (the active task's latest user message)
  when there is one — never on history or past-task text — and renders each selected memory
  as quoted data under its block name. A closed or failing selector makes it abstain: zero
  memory blocks, and the trace says why.
- `history`: the completed tasks the selector found relevant to this turn's task (the
  `past_tasks` source: a past task clears the one floor like a memory, or stays out), each
  confirmed completed by the TaskStateRepository with its bodies from the
  ConversationStateRepository, every past user turn labelled as context, priority 30.

Context order: memory blocks (persona_memories, memorules, memory, consolidated; best
first within each, memorules in their source's rank), then history (best score first), then the
active task LAST, so the one instruction to follow is the freshest thing the model reads,
and nothing recalled or past comes after it.
"""

from __future__ import annotations

import contextlib
import math
import uuid
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import attrs

from . import _admission, _render
from ._exceptions import BrokerClosedError, ConfigError, ValidationError
from ._floor import RECALL_MIN_SCORE
from ._model import HISTORY_BLOCK, MAX_TEXT_CHARS, MEMORY_TYPES, Namespace, SelectionResult, SessionContext
from ._tokens import EstimatingTokenCounter as DefaultTokenCounter
from ._trace import TURN_COMPLETED, BlockTrace, TurnFacts, turn_completed
from .log import get_logger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence

    from ._model import SelectedBlock
    from .abc import (
        ConversationStateRepository,
        ConversationTurn,
        TaskRecord,
        TaskStateRepository,
        TokenCounter,
        TurnObserver,
        TurnRecorder,
    )

logger = get_logger(__name__)

PRIORITIES: Mapping[str, int] = {
    "user": 100,
    "memorules": 80,
    "persona_memories": 70,
    "memory": 60,
    "consolidated": 50,
    "history": 30,
}
"""Block priorities: the active task outranks every memory, every memory outranks history."""

MEMORY_ORDER: tuple[str, ...] = ("persona_memories", "memorules", "memory", "consolidated")
"""The order of memory blocks in the context."""

_LEAST_SECONDS = 1e-6
"""What is left of a turn's deadline when looking its task up took all of it: sources time out."""

DEFAULT_SELECT_BUDGET = 20
"""Most memories asked of the selector per turn; the token budgets then trim further."""

KIND_TASK = "task"
KIND_MEMORY = "memory"
KIND_HISTORY = "history"


class Selector(Protocol):
    """What the broker needs of a MemorySelector."""

    async def select_for_task(  # noqa: PLR0913 - mirrors MemorySelector.select_for_task
        self,
        task_description: str,
        *,
        namespace: Namespace,
        types: Iterable[str] | None = None,
        budget: int = 10,
        context: SessionContext | None = None,
        deadline: float | None = None,
    ) -> SelectionResult:
        """Select memories for the task (may abstain)."""
        ...


def _types(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _known_types(_instance: object, _attribute: attrs.Attribute[Any], value: tuple[str, ...] | None) -> None:
    if value is not None and (not value or any(t not in MEMORY_TYPES for t in value)):
        raise ValidationError.single(
            "types", "unknown", f"must be a non-empty list of {', '.join(MEMORY_TYPES)}"
        )


def _new_turn_id() -> str:
    return str(uuid.uuid4())


def _non_empty(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError.single(attribute.name, "empty", "must be a non-empty string")


def _seconds(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValidationError.single(attribute.name, "range", "must be a number of seconds > 0")


def _at_least(low: int) -> Callable[[object, attrs.Attribute[Any], object], None]:
    def check(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValidationError.single(attribute.name, "range", f"must be an integer >= {low}")

    return check


_positive = _at_least(1)
_non_negative = _at_least(0)


@attrs.frozen(kw_only=True)
class Turn:
    """One turn to assemble: which task, where, for which model window and input budget."""

    task_id: str = attrs.field(validator=_non_empty)
    namespace: Namespace = attrs.field(validator=attrs.validators.instance_of(Namespace))
    window: int = attrs.field(validator=_positive)
    """The model's context window, in tokens."""
    input_budget: int = attrs.field(validator=_non_negative)
    """Tokens the whole assembled context may take."""
    context: SessionContext | None = None
    message: str | None = attrs.field(default=None, validator=attrs.validators.optional(_non_empty))
    """The active task's latest user message: with it the selection follows the conversation."""
    types: tuple[str, ...] | None = attrs.field(default=None, converter=_types, validator=_known_types)
    budget: int = attrs.field(default=DEFAULT_SELECT_BUDGET, validator=_positive)
    """Most memories to select (before the token budgets)."""
    deadline: float | None = attrs.field(default=None, validator=attrs.validators.optional(_seconds))
    """Seconds from the start of `assemble` until memory selection and the history read are cut
    (looking the task up counts); None = the selector's deadline, from the start of selection."""
    memory_budget: int | None = attrs.field(default=None, validator=attrs.validators.optional(_non_negative))
    """Tokens for memory blocks; None = the broker's setting, else min(1200, window // 8)."""
    turn_id: str = attrs.field(factory=_new_turn_id)


@attrs.frozen(kw_only=True)
class Block:
    """One rendered block of the context."""

    name: str
    kind: str
    text: str = attrs.field(repr=False)
    tokens: int
    entry_id: str | None = None
    score: float | None = None
    band: float | None = None
    source: str | None = None
    rank: int | None = None
    """The source's own order within the block (memorules), which the context follows."""


@attrs.frozen(kw_only=True)
class Context:
    """The assembled context of one turn, and its trace event (the `turn.completed` fields)."""

    blocks: tuple[Block, ...]
    trace: Mapping[str, Any] = attrs.field(repr=False)

    @property
    def text(self) -> str:
        """The blocks joined by blank lines, in order."""
        return "\n\n".join(b.text for b in self.blocks)


@attrs.frozen(kw_only=True)
class _Memories:
    selection: SelectionResult | None
    elapsed_ms: float | None
    unavailable: str | None


@attrs.frozen(kw_only=True)
class _Past:
    task: TaskRecord
    turns: tuple[ConversationTurn, ...]
    selected: SelectedBlock


@attrs.frozen(kw_only=True)
class _History:
    tasks: tuple[_Past, ...]
    unavailable: str | None


@attrs.define(eq=False)
class ContextBroker:
    """Assembles each turn's context. Get one from `open_broker`; one `assemble` per turn."""

    _selector: Selector
    _tasks: TaskStateRepository
    _conversations: ConversationStateRepository
    _counter: TokenCounter
    _memory_budget: int | None
    _history_limit: int
    _include_text: bool
    _observer: TurnObserver | None = None
    _closed: bool = attrs.field(default=False, init=False)

    @property
    def closed(self) -> bool:
        """True after `open_broker` exited."""
        return self._closed

    async def assemble(self, turn: Turn) -> Context:
        """Assemble the turn's context and emit its `turn.completed` event.

        Raises ValidationError if the task is unknown or not active, BrokerClosedError after
        close. A memory or history problem never raises: that contributor abstains.
        """
        if self._closed:
            raise BrokerClosedError("the context broker is closed")
        with _observed(self._observer, turn) as recorder:
            context = await self._assemble(turn, recorder)
            recorder.completed(context)
        return context

    async def _assemble(self, turn: Turn, recorder: TurnRecorder) -> Context:
        log = logger.bind(turn_id=turn.turn_id)
        start = anyio.current_time()
        task = await self._active_task(turn)
        # The deadline runs from the start of the turn: looking the task up is part of it.
        memories = await self._memory(_remaining(turn, start), task)
        if memories.selection is not None and memories.elapsed_ms is not None:
            recorder.selection(memories.selection, elapsed_ms=memories.elapsed_ms)
        # History reads only the past tasks the selection found relevant, in what is left.
        history = await self._history(_remaining(turn, start), memories)
        context = self._build(turn, task, memories, history, start)
        event = dict(context.trace)
        event.pop("turn_id")
        log.info(TURN_COMPLETED, **event)
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

    async def _memory(self, turn: Turn, task: TaskRecord) -> _Memories:
        """Run the memory contributor: one selection keyed only on the active task."""
        start = anyio.current_time()
        try:
            selection = await self._selector.select_for_task(
                query_of(task.description, turn.message),
                namespace=turn.namespace,
                types=turn.types,
                budget=turn.budget,
                context=turn.context,
                deadline=turn.deadline,
            )
        except BrokerClosedError:
            return _Memories(selection=None, elapsed_ms=None, unavailable="selector closed")
        except Exception as exc:  # noqa: BLE001 - fail closed: the contributor abstains
            return _Memories(
                selection=None, elapsed_ms=None, unavailable=f"selector failed: {type(exc).__name__}"
            )
        return _Memories(
            selection=selection, elapsed_ms=1000 * (anyio.current_time() - start), unavailable=None
        )

    async def _history(self, turn: Turn, memories: _Memories) -> _History:
        """Run the history contributor: the past tasks the selector found relevant, confirmed
        completed by the task authority, with their conversations (best first, at most
        `history_limit`)."""
        selection = memories.selection
        picked = [] if selection is None else [b for b in selection.blocks if b.block == HISTORY_BLOCK]
        picked = [b for b in picked if b.entry_id != turn.task_id][: self._history_limit]
        if not picked:
            return _History(tasks=(), unavailable=None)
        try:
            with anyio.fail_after(turn.deadline) if turn.deadline is not None else contextlib.nullcontext():
                pasts = []
                for block in picked:
                    past = await self._tasks.get_task(block.entry_id, namespace=turn.namespace)
                    if past is None or past.status != "completed":
                        continue
                    turns = await self._conversations.turns(past.task_id, namespace=turn.namespace)
                    pasts.append(_Past(task=past, turns=tuple(turns), selected=block))
        except TimeoutError:
            return _History(tasks=(), unavailable="history timeout")
        except Exception as exc:  # noqa: BLE001 - fail closed: no history this turn
            return _History(tasks=(), unavailable=f"history failed: {type(exc).__name__}")
        return _History(tasks=tuple(pasts), unavailable=None)

    def _build(
        self, turn: Turn, task: TaskRecord, memories: _Memories, history: _History, start: float
    ) -> Context:
        chosen = memories.selection.blocks if memories.selection is not None else ()
        selected = tuple(b for b in chosen if b.block != HISTORY_BLOCK)
        memory_budget = self._memory_budget_for(turn)
        cuts = _cuts(selected, history, min(memory_budget, turn.input_budget), turn.input_budget)
        nonce = _render.new_nonce(_texts(task, selected, history, cuts), rendered=cuts.bodies.values())
        rendered = self._rendered(task, selected, history, nonce, cuts)
        admission = _admission.admit(
            (item for item, _ in rendered.values()),
            memory_budget=memory_budget,
            input_budget=turn.input_budget,
        )
        admitted = _context_order(rendered[a.key][1] for a in admission.admitted)
        dropped = tuple(
            attrs.evolve(_block_trace(rendered[d.block.key][1]), reason=d.reason) for d in admission.dropped
        )
        facts = TurnFacts(
            turn_id=turn.turn_id,
            task_id=turn.task_id,
            namespace=turn.namespace,
            total_ms=1000 * (anyio.current_time() - start),
            selection_ms=memories.elapsed_ms,
            selection=memories.selection,
            memory_unavailable_reason=memories.unavailable,
            admitted=tuple(_block_trace(b) for b in admitted),
            dropped=dropped,
            memory_budget=admission.memory_budget,
            input_budget=turn.input_budget,
            task_over_budget=admission.task_over_budget,
            floor=RECALL_MIN_SCORE,
            query_has_message=turn.message is not None,
            history_selected=_history_cleared(memories.selection, len(chosen) - len(selected)),
            task_text=task.description,
        )
        trace = turn_completed(facts, include_text=self._include_text)
        if history.unavailable is not None:
            trace["history_unavailable_reason"] = history.unavailable
        return Context(blocks=admitted, trace=trace)

    def _memory_budget_for(self, turn: Turn) -> int:
        if turn.memory_budget is not None:
            return turn.memory_budget
        if self._memory_budget is not None:
            return self._memory_budget
        return _admission.default_memory_budget(turn.window)

    def _rendered(
        self,
        task: TaskRecord,
        selected: Sequence[SelectedBlock],
        history: _History,
        nonce: str,
        cuts: _Cuts,
    ) -> dict[str, tuple[_admission.Admittable, Block]]:
        """Every candidate block, rendered and priced, keyed for admission (in context order)."""
        out: dict[str, tuple[_admission.Admittable, Block]] = {}
        shown = _render.short_ids(s.entry_id for s in selected)
        for s in selected:
            text = _render.render_memory(
                s, nonce=nonce, shown_id=shown[s.entry_id], body=cuts.bodies[s.entry_id]
            )
            block = Block(
                name=s.block,
                kind=KIND_MEMORY,
                text=text,
                tokens=self._counter.count(text),
                entry_id=s.entry_id,
                score=s.score,
                band=s.band,
                source=s.source,
                rank=s.rank,
            )
            out[f"memory:{s.entry_id}"] = (
                _admittable(f"memory:{s.entry_id}", block, s.score, memory=True),
                block,
            )
        for past in history.tasks:
            task_id = past.task.task_id
            text = _render.render_past_task(past.task, past.turns, nonce=nonce, limit=cuts.history[task_id])
            block = Block(
                name="history",
                kind=KIND_HISTORY,
                text=text,
                tokens=self._counter.count(text),
                entry_id=task_id,
                score=past.selected.score,
                band=past.selected.band,
                source=past.selected.source,
            )
            out[f"history:{task_id}"] = (_admittable(f"history:{task_id}", block, past.selected.score), block)
        text = _render.render_active_task(task, nonce=nonce)
        user = Block(
            name="user", kind=KIND_TASK, text=text, tokens=self._counter.count(text), entry_id=task.task_id
        )
        out["user"] = (_admittable("user", user, 1.0, evictable=False), user)
        return out

    def _close(self) -> None:
        self._closed = True


class _NoRecorder:
    """What the broker reports to when nobody observes."""

    def selection(self, result: SelectionResult, *, elapsed_ms: float) -> None:
        """Nothing to record."""

    def completed(self, context: Context) -> None:
        """Nothing to record."""


def _observed(observer: TurnObserver | None, turn: Turn) -> contextlib.AbstractContextManager[TurnRecorder]:
    return contextlib.nullcontext(_NoRecorder()) if observer is None else observer.turn(turn)


def _admittable(
    key: str, block: Block, score: float, *, memory: bool = False, evictable: bool = True
) -> _admission.Admittable:
    return _admission.Admittable(
        key=key,
        name=block.name,
        tokens=block.tokens,
        priority=PRIORITIES.get(block.name, PRIORITIES["memory"]),
        score=score,
        memory=memory,
        evictable=evictable,
        rank=block.rank,
    )


def _history_cleared(selection: SelectionResult | None, selected: int) -> int:
    """Past tasks that cleared the floor: the selector's tally, or (a selection built by hand
    without one) those selected."""
    if selection is None or selection.memories is None:
        return selected
    return selection.history.cleared


def _remaining(turn: Turn, start: float) -> Turn:
    """The turn with what is left of its deadline, which ran from `start` (None: unchanged)."""
    if turn.deadline is None:
        return turn
    left = start + turn.deadline - anyio.current_time()
    return attrs.evolve(turn, deadline=max(left, _LEAST_SECONDS))


@attrs.frozen(kw_only=True)
class _Cuts:
    """What of each text a turn renders: each memory's body (neutralised, cut) by entry id, and
    the characters each past task may render by task id."""

    bodies: Mapping[str, str]
    history: Mapping[str, int]


def _cuts(
    selected: Sequence[SelectedBlock], history: _History, memory_budget: int, input_budget: int
) -> _Cuts:
    """Share out the rendering allowances (`_render.render_chars`) in admission order.

    Memories best first as admission ranks them (priority, a source's rank, score), within
    the memory budget's allowance; past tasks best score first within the input budget's. Each
    memory's body is rendered here, once.
    """
    ranked = sorted(
        enumerate(selected),
        key=lambda p: _admission.order_key(
            priority=PRIORITIES.get(p[1].block, PRIORITIES["memory"]),
            rank=p[1].rank,
            score=p[1].score,
            position=p[0],
        ),
    )
    lengths = (min(len(s.text), MAX_TEXT_CHARS) for _, s in ranked)
    memory = _render.allowances(lengths, _render.render_chars(memory_budget))
    sizes = [sum(n for _, _, n in _render.past_texts(p.task, p.turns)) for p in history.tasks]
    past = _render.allowances(sizes, _render.render_chars(input_budget))
    return _Cuts(
        bodies={s.entry_id: _render.cut(s.text, n) for (_, s), n in zip(ranked, memory, strict=True)},
        history={p.task.task_id: n for p, n in zip(history.tasks, past, strict=True)},
    )


def _texts(task: TaskRecord, selected: Sequence[SelectedBlock], history: _History, cuts: _Cuts) -> list[str]:
    """The texts the turn renders, but memory bodies (checked as rendered): the nonce occurs in none."""
    texts = [task.description, *(s.entry_id for s in selected)]
    for p in history.tasks:
        texts += [p.task.task_id, *(t.role for t in p.turns)]
        allowance = cuts.history[p.task.task_id]
        texts += [text[:chars] for _, text, chars in _render.past_texts(p.task, p.turns, allowance)]
    return texts


def query_of(description: str, message: str | None) -> str:
    """The selection query of a turn: the active task, and its latest user message if any."""
    return description if message is None else f"{description}\n{message}"


def _context_order(blocks: Iterable[Block]) -> tuple[Block, ...]:
    """Memory blocks by group, then a source's rank (memorules), then score; history by
    score; the active task last."""
    items = list(blocks)
    memories = sorted(
        (b for b in items if b.kind == KIND_MEMORY),
        key=lambda b: (_group(b.name), b.rank is None, b.rank or 0, -(b.score or 0.0)),
    )
    history = sorted((b for b in items if b.kind == KIND_HISTORY), key=lambda b: -(b.score or 0.0))
    tasks = [b for b in items if b.kind == KIND_TASK]
    return (*memories, *history, *tasks)


def _group(name: str) -> int:
    return MEMORY_ORDER.index(name) if name in MEMORY_ORDER else len(MEMORY_ORDER)


def _block_trace(block: Block) -> BlockTrace:
    return BlockTrace(
        name=block.name,
        kind=block.kind,
        tokens=block.tokens,
        entry_id=block.entry_id,
        score=block.score,
        band=block.band,
        source=block.source,
        rank=block.rank,
        text=block.text,
    )


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
    problems = []
    if memory_budget is not None and (not isinstance(memory_budget, int) or memory_budget < 0):
        problems.append("memory_budget must be an integer >= 0 or None")
    if isinstance(history_limit, bool) or not isinstance(history_limit, int) or history_limit < 0:
        problems.append("history_limit must be an integer >= 0")
    if observer is not None and not callable(getattr(observer, "turn", None)):
        problems.append("observer must be a broker.abc.TurnObserver (with a turn() method)")
    if problems:
        raise ConfigError("; ".join(problems))
    broker = ContextBroker(
        selector,
        tasks,
        conversations,
        token_counter if token_counter is not None else DefaultTokenCounter(),
        memory_budget,
        history_limit,
        include_text,
        observer,
    )
    try:
        yield broker
    finally:
        broker._close()  # noqa: SLF001 - the context manager owns its broker
