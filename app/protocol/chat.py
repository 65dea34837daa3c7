"""OpenAI's Chat Completions request as pydantic models, plus contextgate's extensions.

Fields contextgate does not use are kept as extras and forwarded to the upstream unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from app.protocol.bounds import MAX_USER_CHARS
from app.protocol.goal import ContextGoal
from app.wire.chat import ChatMessage as WireMessage
from app.wire.json import JSONObject

__all__ = [
    "AttachmentRef",
    "CacheOptions",
    "ChatCompletionRequest",
    "ChatMessage",
    "ContextOptions",
    "EXTENSION_FIELDS",
    "Role",
]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


def _typed_tool_calls(calls: list[JSONObject]) -> list[JSONObject]:
    """Tool calls as OpenAI types them (kept as dicts): id and type strings, a function with a
    string name and string (JSON-encoded) arguments. A wrong type is the client's 400, never
    something the upstream or the store trips over."""
    for index, call in enumerate(calls):
        for key in ("id", "type"):
            if call.get(key) is not None and not isinstance(call[key], str):
                raise ValueError(f"tool_calls[{index}].{key} must be a string")
        function = call.get("function")
        if not isinstance(function, dict):
            raise ValueError(f"tool_calls[{index}].function must be an object")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"tool_calls[{index}].function.name must be a non-empty string")
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            raise ValueError(
                f"tool_calls[{index}].function.arguments must be a string (JSON-encoded)"
            )
    return calls


ToolCalls = Annotated[list[JSONObject], AfterValidator(_typed_tool_calls)]


class ChatMessage(BaseModel):
    """One message as OpenAI accepts it; unknown keys (audio, refusal, …) are kept.

    Parts, calls and blocks stay the client's JSON objects as given (the validators check
    what contextgate relies on; ``chat_messages`` hands them on in the chat form's types)."""

    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[JSONObject] | None = None
    name: str | None = None
    tool_calls: ToolCalls | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None
    # Anthropic-style thinking (litellm's shape), resent byte-for-byte within a tool loop.
    thinking_blocks: list[JSONObject] | None = None

    @model_validator(mode="after")
    def _shape_per_role(self) -> ChatMessage:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a message with role 'tool' needs 'tool_call_id'")
        if self.role in ("user", "system", "developer") and self.content is None:
            raise ValueError(f"a message with role '{self.role}' needs 'content'")
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("only assistant messages may carry 'tool_calls'")
        return self


class AttachmentRef(BaseModel):
    """A document for this request: a stored attachment by id, or inline content."""

    model_config = ConfigDict(extra="forbid")

    attachment_id: str | None = None
    content: str | None = None
    title: str | None = None
    source: str | None = None
    attachment_type: Literal["document", "tool_result"] = "document"

    @model_validator(mode="after")
    def _id_or_content(self) -> AttachmentRef:
        if self.attachment_id is None and self.content is None:
            raise ValueError("an attachment needs 'attachment_id' or 'content'")
        return self


class CacheOptions(BaseModel):
    """``context.cache``: the cache-aware fit for this request (unset fields: deployment's)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool | None = None
    high_water_ratio: float | None = Field(default=None, gt=0, le=1)
    low_water_ratio: float | None = Field(default=None, gt=0, le=1)
    keep_tool_results: int | None = Field(default=None, ge=0)
    clear_at_least_tokens: int | None = Field(default=None, ge=0)
    exclude_tools: list[str] | None = None
    cache_hints: bool | None = None


class ContextOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_input_tokens: int | None = Field(default=None, ge=1)
    planning: Literal["auto", "always", "never"] = "auto"
    memory: bool = True
    memory_injection: Literal["system_append", "context_message", "user_prefix"] = "user_prefix"
    planner_model: str | None = None
    summarizer_model: str | None = None
    memory_extraction: (
        Literal["every_turn", "periodic", "on_save", "llm_triggered", "off"] | None
    ) = None
    compaction_ratio: float | None = Field(default=None, gt=0, le=1)
    # seeds 001/003/004: what the answer is for, retrieval knobs, periodic summaries, date prefix
    goal: ContextGoal | None = None
    memory_top_k: int | None = Field(default=None, ge=1, le=100)
    memory_min_similarity: float | None = Field(default=None, ge=0, le=1)
    summary_every_pairs: int | None = Field(default=None, ge=0, le=10_000)
    date_prefix: bool | None = None
    cache: CacheOptions = Field(default_factory=CacheOptions)
    # Assemble the prompt anew on this call (a rebase of the prompt owner, app/turns/owner.py),
    # as an agent's own compaction asks: its summaries, cut and clearing are applied now.
    rebase: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: JSONObject | None = None
    # The owner of long-term memory: as long as a memory's user may be (issue 24).
    user: str | None = Field(default=None, max_length=MAX_USER_CHARS)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    tools: list[JSONObject] | None = None  # the client's tool definitions, forwarded as given

    # contextgate's extensions
    conversation_id: str | None = None
    attachments: list[AttachmentRef] = Field(default_factory=list)
    context: ContextOptions = Field(default_factory=ContextOptions)

    # The messages in chat form as the door that made this request wrote them, before they
    # were validated (``of_chat_form``): the pipeline reads them instead of dumping the models.
    _chat_form: list[WireMessage] | None = PrivateAttr(default=None)

    @classmethod
    def of_chat_form(
        cls, fields: Mapping[str, object], messages: list[WireMessage]
    ) -> ChatCompletionRequest:
        """A door's turn (``fields`` besides its messages) validated as a chat request; the
        messages, which nothing else holds, are kept as given too (``chat_form``)."""
        request = cls.model_validate({**fields, "messages": messages})
        request._chat_form = messages
        return request

    @property
    def chat_form(self) -> list[WireMessage] | None:
        """The messages as the door wrote them (None: a client's chat request). A copy of the
        request with other messages is made by validating it again."""
        return self._chat_form

    def chat_messages(self) -> list[WireMessage]:
        """The messages as plain JSON in the chat form (what goes upstream and is stored)."""
        return cast(list[WireMessage], [m.model_dump(exclude_none=True) for m in self.messages])

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.get("include_usage"))

    @property
    def output_tokens_requested(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def forwarded_params(self) -> JSONObject:
        """Everything the upstream should see besides model and messages, unchanged (the
        client's JSON, passed on)."""
        params = self.model_dump(
            exclude={"model", "messages", "stream", "stream_options", *EXTENSION_FIELDS},
            exclude_none=True,
        )
        return params

    def without_thinking(self, *, anthropic: bool) -> ChatCompletionRequest:
        """This request with the provider's extended thinking off, for a call whose tool loop
        cannot resend its thinking: ``thinking``, and for an Anthropic model ``reasoning_effort``
        too (litellm turns it into ``thinking``)."""
        dropped = {"thinking", "reasoning_effort"} if anthropic else {"thinking"}
        copy = self.model_copy()
        if copy.__pydantic_extra__:
            copy.__pydantic_extra__ = {
                k: v for k, v in copy.__pydantic_extra__.items() if k not in dropped
            }
        return copy


EXTENSION_FIELDS = frozenset({"conversation_id", "attachments", "context"})
