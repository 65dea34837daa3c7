"""OpenAI's error envelope, as every door but Anthropic's answers an error."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["ErrorBody", "ErrorDetail"]


class ErrorDetail(TypedDict):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(TypedDict):
    """``{"error": {...}}``: the body of an error answer and a stream's error frame."""

    error: ErrorDetail
