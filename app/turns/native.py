"""The turn's upstream call: OpenAI's own Responses API when the door asks for it and every
deployment of the model counts as OpenAI (app/llm/native_responses.py), else the chat form.

The prompt is the one the pipeline built either way; only its wire form differs. Responses
items kept in stored answers (encrypted reasoning, hosted tool calls) never go to a chat call.
"""

from __future__ import annotations

from dataclasses import replace

from app.llm.client import Completion, StreamHandle
from app.llm.native_responses import native_chain, native_complete, native_stream
from app.llm.responses_items import has_native_blocks, input_items, without_native_blocks
from app.turns.context import TurnContext
from app.turns.prepared import Prepared
from app.turns.remember import UpstreamServices, llm_call_with_remember, llm_stream_with_remember

__all__ = ["call_upstream", "open_upstream_stream"]


def _goes_native(services: UpstreamServices, context: TurnContext, prepared: Prepared) -> bool:
    return context.native is not None and native_chain(
        services.llm, prepared.request.model, services.settings
    )


def _chat_form(prepared: Prepared) -> Prepared:
    if not has_native_blocks(prepared.messages):
        return prepared
    return replace(prepared, messages=without_native_blocks(prepared.messages))


async def call_upstream(
    services: UpstreamServices, context: TurnContext, prepared: Prepared
) -> Completion:
    """The answer, not streamed; a native answer's output items go to ``context.native``."""
    native = context.native
    if native is not None and _goes_native(services, context, prepared):
        items = input_items(prepared.messages)
        answer = await native_complete(services.llm, prepared.request.model, items, native)
        if answer is not None:
            native.output = answer.output
            return answer.completion
    return await llm_call_with_remember(services, _chat_form(prepared))  # = llm.complete


async def open_upstream_stream(
    services: UpstreamServices, context: TurnContext, prepared: Prepared
) -> StreamHandle:
    """The opened stream; a native one's chunks carry their typed events."""
    native = context.native
    if native is not None and _goes_native(services, context, prepared):
        items = input_items(prepared.messages)
        handle = await native_stream(services.llm, prepared.request.model, items, native)
        if handle is not None:
            return handle
    return await llm_stream_with_remember(services, _chat_form(prepared))  # = llm.stream
