"""context-broker: decides which memories enter an agent's context each turn, and proves it."""

from __future__ import annotations

from ._exceptions import BrokerClosedError as BrokerClosedError
from ._exceptions import BrokerError as BrokerError
from ._exceptions import ConfigError as ConfigError
from ._exceptions import FieldError as FieldError
from ._exceptions import SourceError as SourceError
from ._exceptions import StoreError as StoreError
from ._exceptions import ValidationError as ValidationError
from ._floor import RECALL_MIN_SCORE as RECALL_MIN_SCORE
from ._model import MEMORY_BLOCKS as MEMORY_BLOCKS
from ._model import MEMORY_TYPES as MEMORY_TYPES
from ._model import Candidate as Candidate
from ._model import Namespace as Namespace
from ._model import SelectedBlock as SelectedBlock
from ._model import SelectionResult as SelectionResult
from ._model import SessionContext as SessionContext
from ._model import SourceOutcome as SourceOutcome
from ._model import SourceStatus as SourceStatus

__all__ = [
    "MEMORY_BLOCKS",
    "MEMORY_TYPES",
    "RECALL_MIN_SCORE",
    "BrokerClosedError",
    "BrokerError",
    "Candidate",
    "ConfigError",
    "FieldError",
    "Namespace",
    "SelectedBlock",
    "SelectionResult",
    "SessionContext",
    "SourceError",
    "SourceOutcome",
    "SourceStatus",
    "StoreError",
    "ValidationError",
]
