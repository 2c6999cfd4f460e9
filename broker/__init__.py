"""context-broker: decides which memories enter an agent's context each turn, and proves it."""

from __future__ import annotations

from ._blocks import MEMORY_BLOCKS as MEMORY_BLOCKS
from ._broker import ContextBroker as ContextBroker
from ._broker import open_broker as open_broker
from ._broker import query_of as query_of
from ._candidates import SourceAnswer as SourceAnswer
from ._candidates import validate_candidate as validate_candidate
from ._exceptions import BrokerClosedError as BrokerClosedError
from ._exceptions import BrokerError as BrokerError
from ._exceptions import CandidateError as CandidateError
from ._exceptions import ConfigError as ConfigError
from ._exceptions import FieldError as FieldError
from ._exceptions import SourceError as SourceError
from ._exceptions import ValidationError as ValidationError
from ._fields import MAX_BUDGET as MAX_BUDGET
from ._fields import MAX_ID_CHARS as MAX_ID_CHARS
from ._fields import MAX_TEXT_CHARS as MAX_TEXT_CHARS
from ._fields import RECALL_MODES as RECALL_MODES
from ._fields import count_errors as count_errors
from ._fields import invisible_errors as invisible_errors
from ._fields import text_errors as text_errors
from ._floor import BELOW_FLOOR as BELOW_FLOOR
from ._floor import DEDUPLICATED as DEDUPLICATED
from ._floor import RECALL_MIN_SCORE as RECALL_MIN_SCORE
from ._floor import SELECTED as SELECTED
from ._floor import Fate as Fate
from ._model import DEFAULT_SELECT_BUDGET as DEFAULT_SELECT_BUDGET
from ._model import MEMORY_TYPES as MEMORY_TYPES
from ._model import Block as Block
from ._model import Candidate as Candidate
from ._model import Context as Context
from ._model import Namespace as Namespace
from ._model import SelectedBlock as SelectedBlock
from ._model import SelectionResult as SelectionResult
from ._model import SessionContext as SessionContext
from ._model import SourceOutcome as SourceOutcome
from ._model import SourceStatus as SourceStatus
from ._model import Tally as Tally
from ._model import Turn as Turn
from ._model import TurnRequest as TurnRequest
from ._selector import DEFAULT_MAX_TURNS as DEFAULT_MAX_TURNS
from ._selector import MemorySelector as MemorySelector
from ._selector import open_selector as open_selector
from ._text import hidden_character as hidden_character
from ._text import printable as printable
from ._tokens import EstimatingTokenCounter as EstimatingTokenCounter
from ._trace import INFERENCE_TRACE_SCHEMA_VERSION as INFERENCE_TRACE_SCHEMA_VERSION
from ._trace import TURN_COMPLETED as TURN_COMPLETED
from ._trace import trace_schema as trace_schema
from .log import add_null_handler

add_null_handler(__name__)  # silent unless the host configures logging (see broker.log)

__all__ = [
    "BELOW_FLOOR",
    "DEDUPLICATED",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_SELECT_BUDGET",
    "INFERENCE_TRACE_SCHEMA_VERSION",
    "MAX_BUDGET",
    "MAX_ID_CHARS",
    "MAX_TEXT_CHARS",
    "MEMORY_BLOCKS",
    "MEMORY_TYPES",
    "RECALL_MIN_SCORE",
    "RECALL_MODES",
    "SELECTED",
    "TURN_COMPLETED",
    "Block",
    "BrokerClosedError",
    "BrokerError",
    "Candidate",
    "CandidateError",
    "ConfigError",
    "Context",
    "ContextBroker",
    "EstimatingTokenCounter",
    "Fate",
    "FieldError",
    "MemorySelector",
    "Namespace",
    "SelectedBlock",
    "SelectionResult",
    "SessionContext",
    "SourceAnswer",
    "SourceError",
    "SourceOutcome",
    "SourceStatus",
    "Tally",
    "Turn",
    "TurnRequest",
    "ValidationError",
    "count_errors",
    "hidden_character",
    "invisible_errors",
    "open_broker",
    "open_selector",
    "printable",
    "query_of",
    "text_errors",
    "trace_schema",
    "validate_candidate",
]
