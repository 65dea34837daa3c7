"""What the turn pipeline carries from a door: the internal turn and who asked."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, Unpack

from starlette.requests import Request

from app.db.models import new_id
from app.keys.caller import Caller
from app.protocol.chat import ChatCompletionRequest
from app.turns.prepared import RecordHook

if TYPE_CHECKING:
    from app.llm.native_responses import NativeRequest

__all__ = ["TurnContext", "TurnOptions"]


class TurnOptions(TypedDict, total=False):
    """What a door may add to a turn (``TurnContext``'s fields of the same names)."""

    on_record: RecordHook | None
    upstream_headers: Mapping[str, str]
    own_system_prompt: bool
    continue_at: int | None
    native: NativeRequest | None


@dataclass(frozen=True, slots=True)
class TurnContext:
    """One request, translated by its door into the chat form the pipeline works in."""

    request: ChatCompletionRequest
    caller: Caller
    request_id: str
    started: float  # time.perf_counter() when the request arrived
    on_record: RecordHook | None = None
    # Provider headers the door passes on (Anthropic's version and beta flags); the LLM client
    # sends them only to deployments of that provider.
    upstream_headers: Mapping[str, str] = field(default_factory=dict)
    # ``request.messages[0]`` is this request's own system prompt (Responses' ``instructions``):
    # sent first for this request only, in place of none stored; never stored, never carried
    # over to the next request.
    own_system_prompt: bool = False
    # With ``request.conversation_id``: continue exactly after this many stored messages
    # (Responses' previous_response_id). The conversation grown past it before the turn is
    # read: ``HeadMoved``; before it is stored: the turn is stored on a branch.
    continue_at: int | None = None
    # The Responses door's request for OpenAI's own Responses API (app/turns/native.py): used
    # when the model counts as OpenAI, else the turn goes through the chat form.
    native: NativeRequest | None = None

    @classmethod
    def of(
        cls,
        http: Request,
        request: ChatCompletionRequest,
        caller: Caller,
        **options: Unpack[TurnOptions],
    ) -> TurnContext:
        """The turn of an HTTP request: its id and arrival time as the middleware noted them."""
        return cls(
            request=request,
            caller=caller,
            request_id=getattr(http.state, "request_id", None) or new_id("req"),
            started=getattr(http.state, "started", None) or time.perf_counter(),
            on_record=options.get("on_record"),
            upstream_headers=options.get("upstream_headers") or {},
            own_system_prompt=options.get("own_system_prompt", False),
            continue_at=options.get("continue_at"),
            native=options.get("native"),
        )
