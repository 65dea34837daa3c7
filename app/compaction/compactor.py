"""Compaction: summarize the oldest whole turns beyond the raw tail; move the boundary.

One summarizer call per window returns an episodic summary and semantic facts (validated);
the summary row and the new boundary are written in one transaction, only if the boundary has
not moved meanwhile. Raw messages are never touched. When active summaries outgrow their share
of the bundle, the oldest are merged into a higher-level summary (hierarchically), so a
conversation of any length keeps a bounded bundle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import update

from app.compaction.bundle import SummaryView, summary_tokens
from app.compaction.llm_json import Summarizer, SummarizerFailed
from app.compaction.prompts import MERGE_SYSTEM, SUMMARIZE_SYSTEM, merge_user, summarize_user
from app.compaction.repository import TurnSpan, summary_repository
from app.compaction.schemas import SummaryOutput
from app.compaction.windows import CompactionWindow, render_transcript, select_window
from app.core.database import Database
from app.core.settings import Settings
from app.db.models import Conversation, ConversationSummaryRow
from app.llm.responses import Usage

__all__ = [
    "CompactionJob",
    "CompactionReport",
    "CompactionWindow",
    "Compactor",
    "render_transcript",
    "select_window",
]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class CompactionReport:
    trigger: str
    turns_compacted: int = 0
    first_turn: int | None = None
    last_turn: int | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    summarizer_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    merges: int = 0
    cost: float = 0.0
    summary_ids: list[str] = field(default_factory=list)
    error: str | None = None
    boundary_tokens: int = 0
    boundary_sequence: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.summary_ids)

    def count_usage(self, usage: Usage | None) -> None:
        if usage is not None:
            self.prompt_tokens += usage.prompt_tokens
            self.completion_tokens += usage.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger,
            "turns_compacted": self.turns_compacted,
            "first_turn": self.first_turn,
            "last_turn": self.last_turn,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summarizer_calls": self.summarizer_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "merges": self.merges,
            "cost": round(self.cost, 8),
            "summary_ids": self.summary_ids,
            "error": self.error,
        }


def _view(row: ConversationSummaryRow) -> SummaryView:
    return SummaryView(row.id, row.first_turn, row.last_turn, row.episodic, row.facts or [])


@dataclass(slots=True)
class _Snapshot:
    """What one planning read saw: boundary, raw turns after it, active summaries."""

    compacted_turn: int
    boundary_tokens: int
    boundary_sequence: int
    total_tokens: int
    message_count: int
    system_tokens: int
    turns: list[TurnSpan]
    summaries: list[ConversationSummaryRow]

    @property
    def raw_tokens(self) -> int:
        return self.total_tokens - max(self.system_tokens, self.boundary_tokens)

    def summary_tokens(self) -> int:
        return sum(row.token_count for row in self.summaries)


# (boundary_tokens, summary_tokens) -> True when the request fits without more compaction
FitsCheck = Callable[[int, int], bool]


@dataclass(frozen=True, slots=True)
class CompactionJob:
    """Which conversation to compact, with which summarizer model, how its tokens count, and
    the bundle's share of the budget (merges keep the summaries within it)."""

    tenant_id: str
    conversation_id: str
    summarizer_model: str
    count: Callable[[str], int]
    bundle_cap: int


class Compactor:
    """Compacts one conversation; call ``run`` while holding its compaction lock."""

    def __init__(
        self, database: Database, settings: Settings, summarizer: Summarizer, job: CompactionJob
    ) -> None:
        self.database = database
        self.settings = settings
        self.summarizer = summarizer
        self.tenant_id = job.tenant_id
        self.conversation_id = job.conversation_id
        self.model = job.summarizer_model
        self.count = job.count
        self.bundle_cap = job.bundle_cap

    async def run(
        self, report: CompactionReport, *, current_stored: bool, fits: FitsCheck | None
    ) -> CompactionReport:
        """Compact until nothing is left beyond the tail, or until ``fits`` says it fits."""
        settings = self.settings
        first = True
        for _ in range(settings.compaction_max_calls):
            snapshot = await self._snapshot()
            if snapshot is None:
                break
            if first:
                report.tokens_before = snapshot.raw_tokens + snapshot.summary_tokens()
                first = False
            report.tokens_after = snapshot.raw_tokens + snapshot.summary_tokens()
            report.boundary_tokens = snapshot.boundary_tokens
            report.boundary_sequence = snapshot.boundary_sequence
            if fits is not None and fits(snapshot.boundary_tokens, snapshot.summary_tokens()):
                break
            window = select_window(
                snapshot.turns,
                tail_turns=settings.raw_tail_turns,
                current_stored=current_stored,
                max_tokens=settings.summarizer_max_input_tokens,
                end_tokens=snapshot.total_tokens,
                end_sequence=snapshot.message_count,
            )
            if window is None:
                break
            try:
                await self._compact(snapshot, window, report)
                await self._merge_if_needed(report)
            except SummarizerFailed as exc:
                report.error = str(exc)
                logger.warning(
                    "compaction failed",
                    extra={"conversation_id": self.conversation_id, "error": str(exc)},
                )
                break
        return report

    async def _snapshot(self) -> _Snapshot | None:
        async with self.database.reading() as session:
            conversation = await summary_repository.conversation(
                session, self.tenant_id, self.conversation_id
            )
            if conversation is None:
                return None
            first = max(conversation.system_prompt_count, conversation.compacted_sequence)
            turns = await summary_repository.turns_after(session, conversation.id, first)
            summaries = await summary_repository.active_summaries(session, conversation.id)
        return _Snapshot(
            compacted_turn=conversation.compacted_turn,
            boundary_tokens=max(conversation.compacted_tokens, conversation.system_prompt_tokens),
            boundary_sequence=first,
            total_tokens=conversation.total_tokens,
            message_count=conversation.message_count,
            system_tokens=conversation.system_prompt_tokens,
            turns=turns,
            summaries=summaries,
        )

    async def _compact(
        self, snapshot: _Snapshot, window: CompactionWindow, report: CompactionReport
    ) -> None:
        async with self.database.reading() as session:
            messages = await summary_repository.messages_between(
                session,
                self.conversation_id,
                first_sequence=window.first_sequence,
                first_turn=window.first_turn,
                last_turn=window.last_turn,
            )
        output, cost = await self.summarizer.call_json(
            self.model,
            SUMMARIZE_SYSTEM,
            summarize_user(render_transcript(messages)),
            SummaryOutput,
            on_usage=report.count_usage,
        )
        report.summarizer_calls += 1
        report.cost += cost
        row = ConversationSummaryRow(
            conversation_id=self.conversation_id,
            tenant_id=self.tenant_id,
            level=0,
            first_turn=window.first_turn,
            last_turn=window.last_turn,
            start_tokens=window.start_tokens,
            end_tokens=window.end_tokens,
            episodic=output.episodic,
            facts=[fact.stored() for fact in output.facts],
            model=self.model,
            cost=cost,
        )
        row.token_count = summary_tokens(_view(row), self.count)
        async with self.database.writing() as session:
            conversation = await summary_repository.conversation(
                session, self.tenant_id, self.conversation_id, lock=True
            )
            if conversation is None or conversation.compacted_turn != snapshot.compacted_turn:
                raise SummarizerFailed("the conversation changed during compaction")
            session.add(row)
            # ``updated_at`` stays: the messages did not change, and a turn read meanwhile still
            # stores with its guarded UPDATE (app/conversations/service.py append_continuing).
            await session.execute(
                update(Conversation)
                .where(Conversation.id == conversation.id)
                .values(
                    compacted_turn=window.last_turn,
                    compacted_sequence=window.end_sequence,
                    compacted_tokens=window.end_tokens,
                    updated_at=Conversation.updated_at,
                )
            )
        report.summary_ids.append(row.id)
        report.turns_compacted += window.turns
        report.first_turn = report.first_turn or window.first_turn
        report.last_turn = window.last_turn
        report.boundary_tokens = window.end_tokens
        report.boundary_sequence = window.end_sequence
        raw_after = snapshot.total_tokens - window.end_tokens
        report.tokens_after = raw_after + snapshot.summary_tokens() + row.token_count

    async def _merge_if_needed(self, report: CompactionReport) -> None:
        """Merge the oldest active summaries while they outgrow their share of the bundle."""
        episode_share = self.bundle_cap * 2 // 3
        for _ in range(2):
            async with self.database.reading() as session:
                active = await summary_repository.active_summaries(session, self.conversation_id)
            total = sum(row.token_count for row in active)
            if total <= episode_share or len(active) < 2:
                return
            group = active[: max(2, len(active) // 2)]
            parts = [(r.first_turn, r.last_turn, r.episodic, list(r.facts or [])) for r in group]
            output, cost = await self.summarizer.call_json(
                self.model,
                MERGE_SYSTEM,
                merge_user(parts),
                SummaryOutput,
                on_usage=report.count_usage,
            )
            report.summarizer_calls += 1
            report.cost += cost
            merged = ConversationSummaryRow(
                conversation_id=self.conversation_id,
                tenant_id=self.tenant_id,
                level=max(r.level for r in group) + 1,
                first_turn=group[0].first_turn,
                last_turn=group[-1].last_turn,
                start_tokens=group[0].start_tokens,
                end_tokens=group[-1].end_tokens,
                episodic=output.episodic,
                facts=[fact.stored() for fact in output.facts],
                model=self.model,
                cost=cost,
            )
            merged.token_count = summary_tokens(_view(merged), self.count)
            async with self.database.writing() as session:
                session.add(merged)
                await session.flush()
                changed = await summary_repository.mark_merged(
                    session, [r.id for r in group], merged.id
                )
                if changed != len(group):
                    raise SummarizerFailed("summaries were merged concurrently")
            report.merges += 1
            report.summary_ids.append(merged.id)
            logger.info(
                "summaries merged",
                extra={
                    "conversation_id": self.conversation_id,
                    "merged": len(group),
                    "level": merged.level,
                    "facts": len(merged.facts),
                },
            )


def summary_views(rows: list[ConversationSummaryRow]) -> list[SummaryView]:
    return [_view(row) for row in rows]
