"""``truncation: "disabled"``, sent explicitly, keeps OpenAI's meaning on a managed request.

At OpenAI, an input that exceeds the model's context window is then a 400 rather than cut.
contextgate would otherwise fit it (compaction, a tail of the history); a client that says
"disabled" gets OpenAI's 400 instead. The input is what OpenAI would have seen: the stored
conversation the request continues plus what it sends (a request that sends back a compaction
item asked for its history to be compacted, so it is not checked). Not sending ``truncation``
(it is echoed as ``"disabled"``, OpenAI's default) leaves the fit to contextgate.
"""

from __future__ import annotations

from app.context.budget import count_tools
from app.conversations.repository import conversation_repository
from app.core.errors import ContextLengthExceeded
from app.keys.caller import Caller
from app.protocol.chat import ChatCompletionRequest
from app.responses.compaction_items import CompactionItem
from app.responses.schemas import ResponsesRequest
from app.state import AppState

__all__ = ["refuse_overflow"]


async def refuse_overflow(
    state: AppState, caller: Caller, body: ResponsesRequest, turn: ChatCompletionRequest
) -> None:
    """A 400 ``context_length_exceeded`` when ``truncation: "disabled"`` was sent and the
    whole input does not fit the model's window."""
    if body.truncation != "disabled" or not turn.context.enabled:
        return  # unmanaged: the provider itself refuses an input too large
    if isinstance(body.input, list) and any(isinstance(i, CompactionItem) for i in body.input):
        return
    model = turn.model
    messages = [m.model_dump(exclude_none=True) for m in turn.messages]
    needed = await state.tokens.count_messages_async(messages, model)
    needed += await count_tools(state.tokens, turn.tools, model)
    if turn.conversation_id is not None:
        async with state.database.reading() as session:
            conversation = await conversation_repository.get(
                session, caller.tenant_id, turn.conversation_id
            )
        needed += conversation.total_tokens if conversation is not None else 0
    window = state.llm.model_info(model).max_input_tokens or state.settings.default_context_window
    if needed > window:
        raise ContextLengthExceeded(
            f"The input ({needed} tokens) exceeds the context window of {model} ({window} "
            "tokens) and truncation is 'disabled'; send truncation 'auto' (or leave it out) "
            "to let contextgate compact and fit it.",
            param="input",
        )
