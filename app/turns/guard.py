"""Around one request of any door: per-key limits (rpm, budget reservation), Idempotency-Key.

The budget reservation and the idempotency claim are held until the answer is complete:
for a stream, until its last byte (or until the client goes away).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping

from fastapi import Request
from starlette.responses import Response, StreamingResponse

from app.core.tasks import Tasks, spawn
from app.keys.caller import Caller
from app.keys.limits import Reservation
from app.state import AppState
from app.turns.idempotency import IdempotentRequest, claim, request_fingerprint
from app.turns.stream import TurnStream

__all__ = ["guarded"]

logger = logging.getLogger(__name__)

_Chunk = str | bytes | memoryview  # what a StreamingResponse's body iterator yields


async def guarded(
    request: Request,
    state: AppState,
    caller: Caller,
    # The door's request (for the Idempotency-Key fingerprint): dumped only when a key came.
    payload: Callable[[], Mapping[str, object]],
    idempotency_key: str | None,
    answer: Callable[[], Awaitable[Response]],
) -> Response:
    reservation = await state.limits.admit(caller)
    claimed: IdempotentRequest | None = None
    try:
        if idempotency_key is not None:
            outcome = await claim(
                state.database,
                caller.tenant_id,
                idempotency_key,
                request_fingerprint(payload()),
                stale_after_s=state.settings.request_timeout_s + 60,
            )
            if isinstance(outcome, Response):
                await reservation.release()
                return outcome
            claimed = outcome
        response = await answer()
    except BaseException:
        await _finish_quietly(reservation, claimed, None)
        raise
    if isinstance(response, StreamingResponse):
        inner = response.body_iterator
        response.body_iterator = _tracked(state.background, inner, response, reservation, claimed)
        return response
    await _finish_quietly(reservation, claimed, response)
    return response


async def _tracked(
    background: Tasks,
    inner: AsyncIterable[_Chunk],
    response: StreamingResponse,
    reservation: Reservation,
    claimed: IdempotentRequest | None,
) -> AsyncIterator[_Chunk]:
    sent: list[bytes] = []
    try:
        async for chunk in inner:
            if claimed is not None:
                sent.append(chunk.encode() if isinstance(chunk, str) else bytes(chunk))
            yield chunk
    finally:
        complete = isinstance(inner, TurnStream) and inner.completed
        if complete:
            stored = _Stored(response.status_code, "text/event-stream", response, b"".join(sent))
            await _finish_quietly(reservation, claimed, stored)
        else:
            # Cut short (client gone or upstream failed): we may be cancelled, so let a
            # background task release the reservation and the idempotency claim.
            spawn(background, _finish_quietly(reservation, claimed, None))


class _Stored:
    def __init__(self, status: int, media: str, response: Response, body: bytes) -> None:
        self.status_code, self.media_type, self.body = status, media, body
        self.headers = response.headers


async def _finish_quietly(
    reservation: Reservation, claimed: IdempotentRequest | None, response: Response | _Stored | None
) -> None:
    try:
        if claimed is not None:
            if response is not None and 200 <= response.status_code < 300:
                await claimed.finish(
                    response.status_code,
                    response.media_type or "application/json",
                    dict(response.headers),
                    bytes(response.body),
                )
            else:
                await claimed.abandon()
    except Exception:
        logger.exception("could not store the idempotent answer")
    finally:
        await reservation.release()
