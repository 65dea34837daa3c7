"""The body of POST /v1/messages: validated once, its messages translated while they are read.

FastAPI validates the route's body against ``MessagesBody``, whose schema is
``MessagesRequest``'s (the same OpenAPI document, the same errors: its validation is the
models', wrapped). When ``plain_messages`` vouches for the request's messages (the shapes an
agent resends on every call: app/messages/plain.py), the models validate everything else (a
one-message stand-in for ``messages``) and the chat form comes from the JSON itself; the
chat turn is then built from it as from the models' translation. Otherwise, or when anything
else in the body is refused, the whole body goes through the models, which answer as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, ValidationError
from pydantic_core import core_schema

from app.messages.plain import plain_messages
from app.messages.schemas import MessagesRequest
from app.wire.chat import ChatMessage

__all__ = ["MessagesBody"]

# What the models validate in place of messages already read in chat form.
_STAND_IN: list[dict[str, str]] = [{"role": "user", "content": "-"}]


@dataclass(slots=True)
class MessagesBody:
    """A validated Messages request. ``chat``: its messages in chat form when they were read
    from the JSON (``request.messages`` is then a stand-in, never to be read), else None."""

    request: MessagesRequest
    chat: list[ChatMessage] | None = None
    raw: object = None  # the parsed body, for the full model (``validated``)

    def validated(self) -> MessagesRequest:
        """The request as the models hold it, messages included (the Idempotency-Key
        fingerprint dumps it): validated now when the messages were read from the JSON."""
        if self.chat is None:
            return self.request
        full = MessagesRequest.model_validate(self.raw)
        full.conversation_id = self.request.conversation_id
        return full

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_wrap_validator_function(_validate, handler(MessagesRequest))


def _validate(value: object, handler: Callable[[object], MessagesRequest]) -> MessagesBody:
    if type(value) is dict and (chat := plain_messages(value.get("messages"))) is not None:
        try:
            return MessagesBody(handler({**value, "messages": _STAND_IN}), chat, value)
        except ValidationError:
            pass  # the whole body, for the errors the models give it
    return MessagesBody(handler(value))
