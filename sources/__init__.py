"""Memory sources: where memories live and how each kind is recalled."""

from __future__ import annotations

from broker.log import add_null_handler

from ._abstraction import AbstractionSource as AbstractionSource
from ._abstraction import FactWriter as FactWriter
from ._abstraction import NewFact as NewFact
from ._abstraction import fact_errors as fact_errors
from ._consolidated import ConsolidatedSource as ConsolidatedSource
from ._consolidated import KnowledgeWriter as KnowledgeWriter
from ._consolidated import knowledge_errors as knowledge_errors
from ._defaults import DEFAULT_SOURCES as DEFAULT_SOURCES
from ._defaults import Writers as Writers
from ._defaults import default_sources as default_sources
from ._exceptions import EmbedderError as EmbedderError
from ._exceptions import StoreError as StoreError
from ._graphs import GraphBatch as GraphBatch
from ._graphs import GraphSource as GraphSource
from ._graphs import GraphWriter as GraphWriter
from ._graphs import edge_errors as edge_errors
from ._graphs import node_errors as node_errors
from ._memorules import CONFIDENCE_LEVELS as CONFIDENCE_LEVELS
from ._memorules import MEMORULE_KINDS as MEMORULE_KINDS
from ._memorules import SOURCE_TYPES as SOURCE_TYPES
from ._memorules import AuditEvent as AuditEvent
from ._memorules import MemorulesSource as MemorulesSource
from ._memorules import MemoruleState as MemoruleState
from ._memorules import RecallMatch as RecallMatch
from ._memorules import WriterSession as WriterSession
from ._memorules import audit_events as audit_events
from ._memorules import delete_memorule as delete_memorule
from ._memorules import memorule_errors as memorule_errors
from ._memorules import memorule_history as memorule_history
from ._memorules import semantic_recall as semantic_recall
from ._memorules import session_errors as session_errors
from ._memorules import update_memorule as update_memorule
from ._neurons import NeuronSource as NeuronSource
from ._neurons import NeuronWriter as NeuronWriter
from ._neurons import NewNeuron as NewNeuron
from ._neurons import neuron_errors as neuron_errors
from ._open import open_store as open_store
from ._past_tasks import PastTaskSource as PastTaskSource
from ._remember import REMEMBER_KINDS as REMEMBER_KINDS
from ._remember import remember as remember
from ._remember import remember_errors as remember_errors
from ._store import MemoryStore as MemoryStore
from ._store_reader import StoreReader as StoreReader
from ._store_source import PersonaSource as PersonaSource
from ._store_source import StoreSource as StoreSource
from ._targets import store_path as store_path
from ._targets import store_target as store_target
from ._tasks import SqliteTaskRepository as SqliteTaskRepository
from ._tasks import task_errors as task_errors
from ._vector_writes import embed_and_store_vectors as embed_and_store_vectors
from .embedding._embedder import COMPUTE_ENV as COMPUTE_ENV
from .embedding._embedder import DEFAULT_COMPUTE as DEFAULT_COMPUTE
from .embedding._embedder import Compute as Compute
from .embedding._embedder import MiniLMEmbedder as MiniLMEmbedder
from .embedding._embedder import load_default_embedder as load_default_embedder
from .relevance._relevance import MODES as RECALL_MODES
from .relevance._scorer import Scorer as Scorer
from .storage._engine import Engine as Engine
from .storage._entries import MAX_RECALL_LIMIT as MAX_RECALL_LIMIT
from .storage._entries import Memory as Memory
from .storage._entries import NewEntry as NewEntry
from .storage._entries import Recalled as Recalled
from .storage._entries import content_id as content_id
from .storage._entries import entry_errors as entry_errors
from .storage._sqlite import SqliteEngine as SqliteEngine
from .storage._sqlite import ensure_memory_type_column as ensure_memory_type_column
from .storage._validate import KINDS as KINDS
from .storage._validate import MAX_TEXT_CHARS as MAX_TEXT_CHARS

add_null_handler(__name__)  # silent unless the host configures logging (see broker.log)

__all__ = [
    "COMPUTE_ENV",
    "CONFIDENCE_LEVELS",
    "DEFAULT_COMPUTE",
    "DEFAULT_SOURCES",
    "KINDS",
    "MAX_RECALL_LIMIT",
    "MAX_TEXT_CHARS",
    "MEMORULE_KINDS",
    "RECALL_MODES",
    "REMEMBER_KINDS",
    "SOURCE_TYPES",
    "AbstractionSource",
    "AuditEvent",
    "Compute",
    "ConsolidatedSource",
    "EmbedderError",
    "Engine",
    "FactWriter",
    "GraphBatch",
    "GraphSource",
    "GraphWriter",
    "KnowledgeWriter",
    "MemoruleState",
    "MemorulesSource",
    "Memory",
    "MemoryStore",
    "MiniLMEmbedder",
    "NeuronSource",
    "NeuronWriter",
    "NewEntry",
    "NewFact",
    "NewNeuron",
    "PastTaskSource",
    "PersonaSource",
    "RecallMatch",
    "Recalled",
    "Scorer",
    "SqliteEngine",
    "SqliteTaskRepository",
    "StoreError",
    "StoreReader",
    "StoreSource",
    "WriterSession",
    "Writers",
    "audit_events",
    "content_id",
    "default_sources",
    "delete_memorule",
    "edge_errors",
    "embed_and_store_vectors",
    "ensure_memory_type_column",
    "entry_errors",
    "fact_errors",
    "knowledge_errors",
    "load_default_embedder",
    "memorule_errors",
    "memorule_history",
    "neuron_errors",
    "node_errors",
    "open_store",
    "remember",
    "remember_errors",
    "semantic_recall",
    "session_errors",
    "store_path",
    "store_target",
    "task_errors",
    "update_memorule",
]
