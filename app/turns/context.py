"""What the turn pipeline carries from a door: the internal turn and who asked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.keys.auth import Caller
from app.protocol.chat import ChatCompletionRequest

__all__ = ["Door", "TurnContext"]

Door = Literal["chat", "responses", "messages"]


@dataclass(frozen=True, slots=True)
class TurnContext:
    """One request, translated by its door into the chat form the pipeline works in."""

    request: ChatCompletionRequest
    caller: Caller
    request_id: str
    started: float  # time.perf_counter() when the request arrived
    door: Door = "chat"
