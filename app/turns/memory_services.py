"""The services of compaction, long-term memory and recall, and of the upstream call (whose
``remember`` tool saves memories), taken from the application state: the pipeline hands each
memory step, and the upstream call, the parts it uses, never the whole state."""

from __future__ import annotations

from app.compaction.compactor import CompactionJob, Compactor
from app.compaction.llm_json import Summarizer
from app.memories.index_refresh import IndexServices
from app.recall.services import RecallServices
from app.state import AppState
from app.turns.remember import UpstreamServices

__all__ = ["compactor", "index_services", "recall_services", "summarizer", "upstream_services"]


def summarizer(state: AppState) -> Summarizer:
    return Summarizer(state.llm, state.settings)


def index_services(state: AppState) -> IndexServices:
    return IndexServices(state.database, state.memory.indexes, state.embedder, state.background)


def recall_services(state: AppState) -> RecallServices:
    memory = state.memory
    return RecallServices(
        state.database,
        state.embedder,
        memory.recall_vectors,
        memory.vector_backlog,
        state.background,
    )


def upstream_services(state: AppState) -> UpstreamServices:
    """The turn's upstream call, with the ``remember`` tool's memories."""
    return UpstreamServices(state.llm, state.settings, index_services(state))


def compactor(state: AppState, job: CompactionJob) -> Compactor:
    return Compactor(state.database, state.settings, summarizer(state), job)
