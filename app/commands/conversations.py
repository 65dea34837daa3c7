"""``contextgate conversations list|show``: what was stored, and what each request sent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

import typer

from app.commands.common import console, run_with_database, settings_or_exit, titled_table
from app.commands.plain import WIDE_COLUMNS, as_json, conversation_lines, list_lines
from app.core.errors import NotFound
from app.inspect.service import InspectService, Timeline
from app.inspect.views import PARTS, ConversationRow, ProviderCacheView, RequestView

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["conversations_app"]

conversations_app = typer.Typer(
    help="Stored conversations and, per request, what was sent upstream.", no_args_is_help=True
)

TenantOption = Annotated[
    str | None, typer.Option("--tenant", help="Only this tenant (a key id, or 'default').")
]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON for scripts.")]


def _plain(out: Console) -> bool:
    """Plain lines rather than tables: piped, or a terminal too narrow for the tables."""
    return not out.is_terminal or out.width < WIDE_COLUMNS


def _short(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _money(value: float) -> str:
    return f"${value:.6f}"


@conversations_app.command("list")
def list_conversations(
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 20,
    tenant: TenantOption = None,
    json: JsonOption = False,
) -> None:
    """The most recently updated conversations, across tenants unless --tenant is given."""
    settings = settings_or_exit()
    rows: list[ConversationRow] = run_with_database(
        settings, lambda db: InspectService(db).conversations(tenant, limit=limit)
    )
    if json:
        typer.echo(as_json(rows))
        return
    out = console()
    if not rows:
        out.print("no conversations stored yet")
        return
    if _plain(out):
        for line in list_lines(rows):
            typer.echo(line)
        return
    table = titled_table(f"conversations ({len(rows)})")
    table.add_column("id", no_wrap=True)
    table.add_column("tenant", no_wrap=True)
    table.add_column("model")
    table.add_column("messages", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("requests", justify="right")
    table.add_column("cost", justify="right")
    table.add_column("updated", no_wrap=True)
    for row in rows:
        table.add_row(
            row.id,
            row.tenant_id,
            row.model or "",
            str(row.message_count),
            str(row.total_tokens),
            str(row.requests),
            _money(row.cost),
            row.updated_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        )
    out.print(table)


def _messages_table(timeline: Timeline, full: bool) -> Table:
    table = titled_table("messages and tool steps")
    table.add_column("#", justify="right")
    table.add_column("turn", justify="right")
    table.add_column("role")
    table.add_column("tokens", justify="right")
    table.add_column("content", overflow="fold")
    table.add_column("request", no_wrap=True)
    for entry in timeline.entries:
        for message in entry.messages:
            text = message.text if full else _short(message.text, 100)
            if message.tool_calls:
                calls = ", ".join(
                    f"{c.name}({c.arguments if full else _short(c.arguments, 40)})"
                    for c in message.tool_calls
                )
                text = f"{text}\n→ {calls}".strip()
            role = message.role
            if message.kind == "tool-result":
                role = f"tool ← {message.tool_call_id}"
            elif message.kind == "tool-call":
                role = "assistant (tool call)"
            if message.status != "complete":
                role += f" [{message.status}]"
            table.add_row(
                str(message.sequence_number),
                str(message.turn_number),
                role,
                str(message.token_count),
                text,
                message.request_id or "",
            )
    return table


def _requests_table(requests: list[RequestView]) -> Table:
    table = titled_table("requests: tokens sent by part (of the input budget)")
    table.add_column("request", no_wrap=True)
    table.add_column("status")
    table.add_column("strategy")
    for part in PARTS:
        table.add_column(part, justify="right")
    table.add_column("used/budget", justify="right")
    table.add_column("msgs in/out", justify="right")
    table.add_column("prompt/compl.", justify="right")
    table.add_column("cost", justify="right")
    for request in requests:
        table.add_row(
            request.id,
            f"{request.status} {request.status_code}",
            request.strategy + (" (planner)" if request.llm_planning_used else ""),
            *[str(part.tokens) for part in request.parts],
            f"{request.tokens_used}/{request.max_input_tokens}",
            f"{request.messages_included}/{request.messages_excluded}",
            f"{request.prompt_tokens}/{request.completion_tokens}",
            _money(request.total_cost),
        )
    return table


def _artifacts_table(requests: list[RequestView]) -> Table | None:
    table = titled_table("artifacts: included, summarized, extracted or excluded")
    for name in ("request", "artifact", "type", "source", "fate", "chars", "cache"):
        table.add_column(name, no_wrap=name in ("request", "artifact"))
    rows = 0
    for request in requests:
        for artifact in request.artifacts:
            rows += 1
            table.add_row(
                request.id,
                str(artifact.get("artifact_id", "")),
                str(artifact.get("artifact_type", "")),
                _short(str(artifact.get("source", "")), 40),
                str(artifact.get("strategy", "")),
                f"{artifact.get('original_size_chars', 0)} → "
                f"{artifact.get('processed_size_chars', 0)}",
                "hit" if artifact.get("cache_hit") else "",
            )
    return table if rows else None


def _kind(summary: Mapping[str, object]) -> str:
    """compaction or periodic, and rule_based when the summarizer failed (migration 0007)."""
    kind = str(summary.get("kind") or "compaction")
    return f"{kind}, rule-based" if summary.get("method") == "rule_based" else kind


def _print_extras(out: Console, timeline: Timeline) -> None:
    if timeline.summaries:
        table = titled_table("compaction summaries (and periodic ones)")
        for name in ("id", "kind", "turns", "level", "tokens", "episodic"):
            table.add_column(name, overflow="fold")
        for summary in timeline.summaries:
            table.add_row(
                str(summary.get("id", "")),
                _kind(summary),
                f"{summary.get('first_turn', '?')}–{summary.get('last_turn', '?')}",
                str(summary.get("level", 0)),
                str(summary.get("token_count", "")),
                _short(str(summary.get("episodic", "")), 200),
            )
        out.print(table)
    for request in timeline.requests:
        details = []
        if request.compaction:
            details.append(f"compaction {request.compaction}")
        if request.memories_injected:
            ids = ", ".join(str(m.get("id", m)) for m in request.memories_injected)
            details.append(f"memories injected: {ids}")
        if request.cache_hits or request.cache_misses:
            details.append(f"summary cache {request.cache_hits} hit / {request.cache_misses} miss")
        if request.provider_cache:
            details.append(_provider_cache(request.provider_cache))
        details.extend(f"note: {note}" for note in request.notes)
        if request.error:
            details.append(f"error: {_short(request.error, 200)}")
        for line in details:
            out.print(f"{request.id}  {line}", markup=False)


def _provider_cache(cache: ProviderCacheView) -> str:
    one_hour = f" ({cache.write_1h_tokens} for 1 h)" if cache.write_1h_tokens else ""
    return (
        f"provider cache: read {cache.read_tokens} ({_money(cache.read_cost)}), "
        f"wrote {cache.write_tokens}{one_hour} ({_money(cache.write_cost)})"
    )


@conversations_app.command("show")
def show_conversation(
    conversation_id: Annotated[str, typer.Argument(help="conv_… id.")],
    tenant: TenantOption = None,
    full: Annotated[bool, typer.Option(help="Show whole message texts.")] = False,
    last: Annotated[
        int | None, typer.Option(min=1, help="Only the newest N messages and their requests.")
    ] = None,
    json: JsonOption = False,
) -> None:
    """One conversation: its messages, tool steps, summaries, and every request's context."""
    settings = settings_or_exit()
    try:
        timeline: Timeline = run_with_database(
            settings, lambda db: InspectService(db).timeline(tenant, conversation_id, last=last)
        )
    except NotFound as exc:
        typer.echo(f"contextgate: {exc.message}", err=True)
        raise typer.Exit(1) from None
    if json:
        typer.echo(as_json(timeline))
        return
    out = console()
    if _plain(out):
        for line in conversation_lines(timeline, out.width, full):
            typer.echo(line)
        _print_extras(out, timeline)
        return
    row = timeline.conversation
    out.print(
        f"[bold]{row.id}[/bold]  tenant {row.tenant_id}  model {row.model or '?'}  "
        f"{row.message_count} messages  {row.total_tokens} tokens  "
        f"{row.requests} requests  {_money(row.cost)}"
    )
    if timeline.hidden_messages:
        out.print(f"({timeline.hidden_messages} older messages not shown: drop --last)")
    if timeline.summaries is None:
        out.print("(compaction summaries: not installed in this database)", style="dim")
    out.print(_messages_table(timeline, full))
    if timeline.requests:
        out.print(_requests_table(timeline.requests))
    artifacts = _artifacts_table(timeline.requests)
    if artifacts is not None:
        out.print(artifacts)
    _print_extras(out, timeline)
