"""Plain-text and JSON output of ``contextgate conversations``: for pipes, narrow terminals
(under ``WIDE_COLUMNS``) and scripts (``--json``). Lines fit the width; long texts wrap."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime

import orjson

from app.inspect.service import Timeline
from app.inspect.views import ConversationRow, RequestView

__all__ = ["WIDE_COLUMNS", "as_json", "conversation_lines", "list_lines"]

# Rich tables need this many columns to show every column of the requests table readably.
WIDE_COLUMNS = 120


def _default(value: object) -> object:
    if isinstance(value, datetime):  # stored in UTC; SQLite gives them back without a zone
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(type(value).__name__)


def as_json(value: object) -> str:
    """Dataclasses (and lists of them) as indented JSON; timestamps in ISO 8601."""
    # Timestamps are stored in UTC; SQLite gives them back without a zone (OPT_NAIVE_UTC).
    option = orjson.OPT_INDENT_2 | orjson.OPT_NAIVE_UTC
    return orjson.dumps(value, default=_default, option=option).decode()


def list_lines(rows: list[ConversationRow]) -> Iterator[str]:
    """Two lines per conversation: its id and model, then its counts."""
    yield f"conversations ({len(rows)}), newest first"
    for row in rows:
        yield f"{row.id}  {row.model or '?'}  tenant {row.tenant_id}"
        yield (
            f"  messages {row.message_count}  tokens {row.total_tokens}  requests "
            f"{row.requests}  ${row.cost:.6f}  {row.updated_at:%Y-%m-%d %H:%M} UTC"
        )


def _wrap(text: str, width: int, indent: str = "    ") -> list[str]:
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines.extend(
            textwrap.wrap(paragraph, width, initial_indent=indent, subsequent_indent=indent)
            or [indent.rstrip()]
        )
    return lines


def _request_lines(request: RequestView, width: int) -> Iterator[str]:
    planner = " (planner)" if request.llm_planning_used else ""
    yield f"{request.id}  {request.status} {request.status_code}  {request.strategy}{planner}"
    parts = "  ".join(f"{part.name} {part.tokens}" for part in request.parts)
    yield from _wrap(f"sent {request.tokens_used}/{request.max_input_tokens}: {parts}", width)
    yield (
        f"    msgs in/out {request.messages_included}/{request.messages_excluded}  "
        f"prompt/compl. {request.prompt_tokens}/{request.completion_tokens}  "
        f"cost ${request.total_cost:.6f}"
    )


def _artifact_lines(requests: list[RequestView], width: int) -> Iterator[str]:
    for request in requests:
        for artifact in request.artifacts:
            cache = "  cache hit" if artifact.get("cache_hit") else ""
            yield f"{request.id}  {artifact.get('artifact_id', '')}"
            yield from _wrap(
                f"{artifact.get('artifact_type', '')} from {artifact.get('source', '')}: "
                f"{artifact.get('strategy', '')} {artifact.get('original_size_chars', 0)} → "
                f"{artifact.get('processed_size_chars', 0)} chars{cache}",
                width,
            )


def conversation_lines(timeline: Timeline, width: int, full: bool) -> Iterator[str]:
    row = timeline.conversation
    yield f"{row.id}  tenant {row.tenant_id}  model {row.model or '?'}"
    yield (
        f"{row.message_count} messages  {row.total_tokens} tokens  {row.requests} requests  "
        f"${row.cost:.6f}"
    )
    if timeline.hidden_messages:
        yield f"({timeline.hidden_messages} older messages not shown: drop --last)"
    yield ""
    yield "messages and tool steps"
    for entry in timeline.entries:
        for message in entry.messages:
            role = message.role
            if message.kind == "tool-result":
                role = f"tool ← {message.tool_call_id}"
            elif message.kind == "tool-call":
                role = "assistant (tool call)"
            if message.status != "complete":
                role += f" [{message.status}]"
            sent_by = f"  {message.request_id}" if message.request_id else ""
            yield (
                f"#{message.sequence_number} turn {message.turn_number}  {role}  "
                f"{message.token_count} tokens{sent_by}"
            )
            text = message.text if full else textwrap.shorten(message.text, 300) or ""
            for call in message.tool_calls:
                arguments = call.arguments if full else textwrap.shorten(call.arguments, 120)
                text += f"\n→ {call.name}({arguments})"
            yield from _wrap(text.strip(), width)
    if timeline.requests:
        yield ""
        yield "requests: tokens sent by part (of the input budget)"
        for request in timeline.requests:
            yield from _request_lines(request, width)
    if any(request.artifacts for request in timeline.requests):
        yield ""
        yield "artifacts: included, summarized, extracted or excluded"
        yield from _artifact_lines(timeline.requests, width)
