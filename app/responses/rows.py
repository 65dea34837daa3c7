"""The ``responses`` row the Responses door writes with one core INSERT, column by column as
``ResponseRecord`` declares it."""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from app.wire.json import JSONObject
from app.wire.responses import ResponseOutput, ResponsesUsage

__all__ = ["ResponseRow"]


class ResponseRow(TypedDict):
    id: str
    tenant_id: str
    conversation_id: str
    end_sequence: int
    model: str
    status: str
    output: list[ResponseOutput]
    usage: ResponsesUsage
    input_items: list[JSONObject]  # the request's input as OpenAI lists it back
    echo: JSONObject  # what the Response repeats of its request, and the turn's report
    incomplete_reason: str | None
    created_at: datetime
