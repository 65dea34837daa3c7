"""Anthropic shapes the Messages door reads that app/wire does not name: the sources of image
and document blocks, the error body, and a thinking block read key by key.

Block sources sit in pydantic models, and pydantic cannot build a schema from
``typing.TypedDict`` on Python 3.11: mypy sees the TypedDicts, pydantic the plain object it
always validated (the models' validators check the keys the TypedDicts name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

__all__ = [
    "AnthropicError",
    "AnthropicErrorBody",
    "Base64DocumentSource",
    "Base64ImageSource",
    "DocumentSource",
    "ImageSource",
    "ThinkingFields",
    "TextSource",
    "URLSource",
]


class Base64ImageSource(TypedDict):
    type: Literal["base64"]
    media_type: str
    data: str


class Base64DocumentSource(TypedDict):
    type: Literal["base64"]
    media_type: NotRequired[str]  # a PDF when not said
    data: str


class URLSource(TypedDict):
    type: Literal["url"]
    url: str


class TextSource(TypedDict):
    type: Literal["text"]
    media_type: NotRequired[str]
    data: str


if TYPE_CHECKING:
    ImageSource = Base64ImageSource | URLSource
    DocumentSource = TextSource | Base64DocumentSource | URLSource
else:
    from app.wire.json import JSONObject

    ImageSource = JSONObject
    DocumentSource = JSONObject


class ThinkingFields(TypedDict, total=False):
    """A thinking block of either kind (``thinking`` or ``redacted_thinking``) read key by key,
    as the provider sent it."""

    type: str
    thinking: str
    signature: str
    data: str


class AnthropicError(TypedDict):
    type: str
    message: str


class AnthropicErrorBody(TypedDict):
    type: Literal["error"]
    error: AnthropicError
