"""GET /ui …: conversations, one conversation's timeline, a user's memories (HTML)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from app.core.deps import Storage
from app.core.errors import NotFound, RateLimited
from app.core.settings import Settings
from app.inspect.service import InspectService
from app.inspect.views import PARTS
from app.keys.auth import client_address
from app.keys.throttle import AuthThrottle
from app.state import AppState, StateDep
from app.ui.auth import COOKIE, close_session, is_authorized, key_matches, open_session

if TYPE_CHECKING:
    from fastapi.templating import Jinja2Templates

__all__ = ["install_ui", "router"]

HERE = Path(__file__).resolve().parent


@cache
def _templates() -> Jinja2Templates:
    """Built when the first page is shown: Jinja2 is ~5 MB of a server whose inspector may
    never be opened (issue 26)."""
    from fastapi.templating import Jinja2Templates

    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.filters["money"] = lambda value: f"${float(value or 0):.6f}"
    templates.env.filters["when"] = lambda value: (
        value.strftime("%Y-%m-%d %H:%M:%S UTC") if hasattr(value, "strftime") else str(value or "")
    )
    templates.env.globals["PARTS"] = PARTS
    return templates


# Everything the page loads comes from here: no CDN, works offline.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

# A long conversation's page shows its newest messages (and their requests) unless ?all=1.
TIMELINE_MESSAGES = 400

router = APIRouter(prefix="/ui", include_in_schema=False)


def _page(request: Request, name: str, status_code: int = 200, **context: object) -> Response:
    response = _templates().TemplateResponse(request, name, context, status_code=status_code)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "no-store"
    return response


async def _guard(request: Request, state: AppState) -> Response | None:
    """None when the caller may look; otherwise where to go instead."""
    presented = request.query_params.get("key")
    master = state.settings.master_key
    if presented is not None and master is not None:
        refused = await _check_key(request, state.settings, state.auth_throttle, presented)
        if refused is not None:
            return refused
        query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "key"])
        target = request.url.path + (f"?{query}" if query else "")
        response = RedirectResponse(target, status_code=303)
        await _set_cookie(response, state)
        return response
    if master is not None:
        try:
            state.auth_throttle.check(client_address(request))
        except RateLimited as exc:
            return _throttled(request, exc, request.url.path)
    authorized = await is_authorized(request, state)
    if authorized:
        return None
    if authorized is None:  # a wrong Bearer key
        try:
            await state.auth_throttle.failed(client_address(request))
        except RateLimited as exc:
            return _throttled(request, exc, request.url.path)
    return _page(request, "login.html", 401, error=None, next=request.url.path)


async def _check_key(
    request: Request, settings: Settings, throttle: AuthThrottle, presented: str
) -> Response | None:
    """None when ``presented`` is the master key; else the login page (401, or 429 when the
    address has failed too often)."""
    address = client_address(request)
    target = _safe_next(request.url.path)
    try:
        throttle.check(address)
        if key_matches(settings, presented):
            return None
        await throttle.failed(address)
    except RateLimited as exc:
        return _throttled(request, exc, target)
    return _page(request, "login.html", 401, error="Wrong key.", next=target)


def _throttled(request: Request, exc: RateLimited, target: str) -> Response:
    response = _page(request, "login.html", 429, error=exc.message, next=_safe_next(target))
    response.headers.update(exc.headers)
    return response


async def _set_cookie(response: Response, storage: Storage) -> None:
    response.set_cookie(
        COOKIE,
        await open_session(storage),
        max_age=storage.settings.ui_session_ttl_s,
        httponly=True,
        samesite="strict",
        path="/ui",
    )


@router.get("", response_class=HTMLResponse)
async def conversations_page(
    request: Request,
    state: StateDep,
    page: Annotated[int, Query(ge=1)] = 1,
) -> Response:
    if (redirect := await _guard(request, state)) is not None:
        return redirect
    size = 50
    rows = await InspectService(state.database).conversations(
        None, limit=size + 1, offset=(page - 1) * size
    )
    return _page(
        request,
        "conversations.html",
        conversations=rows[:size],
        page=page,
        has_more=len(rows) > size,
    )


@router.get("/conversations/{conversation_id}", response_class=HTMLResponse)
async def conversation_page(
    request: Request,
    state: StateDep,
    conversation_id: str,
    show_all: Annotated[bool, Query(alias="all")] = False,
) -> Response:
    if (redirect := await _guard(request, state)) is not None:
        return redirect
    last = None if show_all else TIMELINE_MESSAGES
    try:
        timeline = await InspectService(state.database).timeline(None, conversation_id, last=last)
    except NotFound as exc:
        return _page(request, "error.html", 404, message=exc.message)
    return _page(request, "conversation.html", timeline=timeline)


@router.get("/memories", response_class=HTMLResponse)
async def memories_page(
    request: Request,
    state: StateDep,
    user: Annotated[str | None, Query(max_length=200)] = None,
    tenant: Annotated[str | None, Query(max_length=64)] = None,
) -> Response:
    if (redirect := await _guard(request, state)) is not None:
        return redirect
    service = InspectService(state.database)
    users = await service.memory_users(None)
    memories = await service.memories(tenant, user) if user else None
    return _page(request, "memories.html", users=users, user=user, tenant=tenant, memories=memories)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str = "/ui") -> Response:
    return _page(request, "login.html", error=None, next=_safe_next(next))


@router.post("/login")
async def login(
    request: Request,
    state: StateDep,
    key: Annotated[str, Form(max_length=500)],
    next: Annotated[str, Form(max_length=500)] = "/ui",
) -> Response:
    if state.settings.master_key is None:
        return RedirectResponse(_safe_next(next), status_code=303)
    refused = await _check_key(request, state.settings, state.auth_throttle, key)
    if refused is not None:
        return refused
    response = RedirectResponse(_safe_next(next), status_code=303)
    await _set_cookie(response, state)
    return response


@router.get("/logout")
async def logout(request: Request, state: StateDep) -> Response:
    """Ends the session on the server too: the old cookie no longer opens anything."""
    await close_session(state, request.cookies.get(COOKIE))
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


def _safe_next(target: str) -> str:
    """Only paths of the inspector itself: no open redirect."""
    return target if target.startswith("/ui") and "//" not in target else "/ui"


def install_ui(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
