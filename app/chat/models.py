"""What the chat pipeline carries from the HTTP layer."""

from __future__ import annotations

from dataclasses import dataclass

from app.keys.auth import Caller
from app.protocol.chat import ChatCompletionRequest

__all__ = ["ChatContext"]


@dataclass(frozen=True, slots=True)
class ChatContext:
    request: ChatCompletionRequest
    caller: Caller
    request_id: str
    started: float  # time.perf_counter() when the request arrived
