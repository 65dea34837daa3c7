"""OpenAI's Responses API on the wire: the request and its input items (pydantic).

Only what contextgate translates is modelled strictly; unknown keys inside an item are kept
(OpenAI adds fields often) but never forwarded upstream as they are.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from app.protocol.bounds import MAX_USER_CHARS, Metadata, check_extra_size
from app.protocol.chat import AttachmentRef, ContextOptions
from app.responses.compaction_items import CompactionItem, CompactionTriggerItem
from app.wire.json import JSONObject

__all__ = [
    "ContentPart",
    "ConversationParam",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "InputItem",
    "ItemReference",
    "MessageItem",
    "ReasoningItem",
    "ResponsesRequest",
    "SummaryText",
]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")

    @model_validator(mode="after")
    def _bounded_extras(self) -> _Open:
        check_extra_size(self.model_extra)  # kept as given in the stored input items
        return self


class ContentPart(_Open):
    """A content part of a message: input_text, output_text, input_image, input_file, refusal."""

    type: Literal["input_text", "output_text", "text", "input_image", "input_file", "refusal"]
    text: str | None = None
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None
    refusal: str | None = None
    file_data: str | None = None
    filename: str | None = None


class MessageItem(_Open):
    type: Literal["message"] = "message"
    id: str | None = None
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[ContentPart]
    status: str | None = None


class FunctionCallItem(_Open):
    type: Literal["function_call"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str
    status: str | None = None


class FunctionCallOutputItem(_Open):
    type: Literal["function_call_output"]
    id: str | None = None
    call_id: str = Field(min_length=1)
    output: str | list[ContentPart]
    status: str | None = None


class SummaryText(_Open):
    type: Literal["summary_text"] = "summary_text"
    text: str


class ReasoningItem(_Open):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[SummaryText] = Field(default_factory=list)
    content: list[JSONObject] | None = None
    encrypted_content: str | None = None
    status: str | None = None


class ItemReference(_Open):
    """``{"type": "item_reference", "id": …}``: an item stored earlier, resolved to it before
    translation (app/responses/references.py)."""

    type: Literal["item_reference"]
    id: str = Field(min_length=1)


def _item_kind(value: object) -> str:
    if isinstance(value, dict):
        return str(value.get("type") or "message")
    return str(getattr(value, "type", "message"))


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[ItemReference, Tag("item_reference")]
    | Annotated[CompactionItem, Tag("compaction")]
    | Annotated[CompactionTriggerItem, Tag("compaction_trigger")],
    Discriminator(
        _item_kind,
        custom_error_type="unsupported_item",
        custom_error_message=(
            "Input items may be of type 'message', 'function_call', 'function_call_output', "
            "'reasoning', 'item_reference', 'compaction' or 'compaction_trigger'"
        ),
    ),
]


class FunctionTool(_Open):
    """Responses' flat function tool: {type, name, description, parameters, strict}."""

    type: Literal["function"]
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: JSONObject | None = None  # a JSON schema, passed on
    strict: bool | None = None


class ConversationParam(_Open):
    id: str = Field(min_length=1)


class ResponsesRequest(BaseModel):
    """``POST /v1/responses``, plus contextgate's extensions (conversation_id, context,
    attachments). Fields of OpenAI's that contextgate has no use for are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    input: str | list[InputItem]
    instructions: str | None = None
    previous_response_id: str | None = None
    # Function tools (also inside ``namespace`` tools); hosted tools (web_search, …) go on to
    # OpenAI models (app/llm/native_responses.py) only: a chat upstream cannot run them.
    tools: list[JSONObject] | None = None
    tool_choice: Literal["auto", "none", "required"] | JSONObject | None = None
    store: bool = True
    stream: bool = False
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    metadata: Metadata | None = None
    reasoning: JSONObject | None = None
    truncation: Literal["auto", "disabled"] | None = None
    # [{"type": "compaction", "compact_threshold": N}]: management.py maps it onto the budget.
    context_management: list[JSONObject] | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = Field(default=None, max_length=MAX_USER_CHARS)
    text: JSONObject | None = None
    # The stored conversation this turn continues (an id, or {"id": …}); echoed as
    # {"id": …} in the Response. contextgate's ``conversation_id`` says the same.
    conversation: str | ConversationParam | None = None

    # contextgate's extensions
    conversation_id: str | None = None
    attachments: list[AttachmentRef] = Field(default_factory=list)
    context: ContextOptions = Field(default_factory=ContextOptions)

    def conversation_ref(self) -> str | None:
        """The id ``conversation`` names (a string, or ``{"id": …}``)."""
        if self.conversation is None or isinstance(self.conversation, str):
            return self.conversation
        return self.conversation.id
