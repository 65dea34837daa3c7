"""An upstream stream whose first chunk has arrived, as the rest of contextgate reads it:
normalized chunks, and an end without a finish reason or ``[DONE]`` reported as incomplete."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import cast

from app.core.errors import UpstreamError
from app.llm.responses import normalize_chunk
from app.llm.routing import Deployment
from app.wire.stream import ChatChunk

__all__ = ["StreamHandle", "incomplete_stream"]

logger = logging.getLogger(__name__)


def _has_finish(chunk: ChatChunk) -> bool:
    return any(
        isinstance(choice, dict) and choice.get("finish_reason")
        for choice in chunk.get("choices") or ()
    )


def _upstream_finished(stream: object, seen_finish: bool) -> bool:
    """Whether the upstream itself ended its stream properly: a finish reason or ``[DONE]``.

    litellm's stream wrapper synthesizes a final chunk with finish_reason "stop" when the
    provider's stream just ends; what the provider really sent is its ``received_finish_reason``.
    """
    if getattr(stream, "done", False):  # openai_compat.SSEStream saw [DONE]
        return True
    if hasattr(stream, "received_finish_reason"):
        return bool(
            stream.received_finish_reason or getattr(stream, "intermittent_finish_reason", None)
        )
    return seen_finish


def incomplete_stream(model_name: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream for model '{model_name}' ended its stream without a finish reason "
        "or [DONE]: the answer is incomplete.",
        status_code=502,
        code="upstream_stream_incomplete",
    )


class StreamHandle:
    """An upstream stream whose first chunk has arrived; iterate for normalized chunks."""

    def __init__(
        self, first: object | None, rest: AsyncIterator[object] | None, deployment: Deployment
    ) -> None:
        # ``first`` and the chunks of ``rest``: litellm's chunk objects, or the direct path's
        # parsed events (normalize_chunk reads both). ``rest`` is None only for a subclass
        # with chunks of its own.
        self._first = first
        self._rest = rest
        self.deployment = deployment

    async def chunks(self) -> AsyncIterator[ChatChunk]:
        """Normalized chunks; an upstream stream that ends without a finish reason and
        without ``[DONE]`` was cut short: UpstreamError 502 ``upstream_stream_incomplete``
        (the stream lifecycle sends the error frame and stores the partial answer as
        incomplete), never a quiet end taken for a complete answer."""
        finished = False
        if self._first is not None:
            first, self._first = self._first, None
            chunk = normalize_chunk(first)
            finished = _has_finish(chunk)
            yield chunk
        async for raw in cast("AsyncIterator[object]", self._rest):
            chunk = normalize_chunk(raw)
            finished = finished or _has_finish(chunk)
            yield chunk
        if not _upstream_finished(self._rest, finished):
            raise incomplete_stream(self.deployment.model_name)

    async def aclose(self) -> None:
        closer = getattr(self._rest, "aclose", None)
        if closer is not None:
            try:
                await closer()
            except Exception:  # the stream is being abandoned; nothing to save
                logger.debug("closing upstream stream failed", exc_info=True)
