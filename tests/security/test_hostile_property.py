"""Issue 24: arbitrary JSON keys, depths and unicode on every door: never a 5xx, and a refused
request stores nothing; on SQLite and PostgreSQL.

Hypothesis takes a valid request of each door and puts a hostile piece into it: a key of any
code points (lone surrogates and NUL included) with any JSON value, a value nested up to 400
levels deep, a string of any code points in place of a field, an integer past 64 bits or a
non-finite float. The real server answers; a 4xx must leave the stored conversations and
memories as they were, and the server's log must show no unhandled error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fake_upstream import FakeUpstream
from tests.support.proxy import ContextgateServer

MODEL = "gpt-4o-mini"
EXAMPLES = 150

ANY_TEXT = st.text(st.characters(exclude_categories=[]), max_size=12)
SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | ANY_TEXT
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(ANY_TEXT, children, max_size=3)
    ),
    max_leaves=8,
)


def _nest(value: Any, depth: int, as_list: bool) -> Any:
    for _ in range(depth):
        value = [value] if as_list else {"k": value}
    return value


DEEP = st.builds(_nest, VALUES, st.integers(1, 400), st.booleans())


def _doors() -> dict[str, dict[str, Any]]:
    """A valid body per door; each is the base a hostile piece goes into."""
    user = {"role": "user", "content": "hello"}
    return {
        "/v1/chat/completions": {"model": MODEL, "messages": [user]},
        "/v1/messages": {"model": MODEL, "max_tokens": 16, "messages": [user]},
        "/v1/messages/count_tokens": {"model": MODEL, "messages": [user]},
        "/v1/responses": {"model": MODEL, "input": [{"role": "user", "content": "hello"}]},
        "/v1/embeddings": {"model": MODEL, "input": "hello"},
        "/v1/memories": {"user": "prop-user", "content": "likes tea"},
        "/v1/attachments": {"content": "a document", "title": "doc"},
    }


def _places(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of ``body`` a key may go into: the body and its first message/item."""
    places = [body]
    for field in ("messages", "input"):
        if isinstance(body.get(field), list):
            places.append(body[field][0])
    return places


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, bytes]:
    path = draw(st.sampled_from(sorted(_doors())))
    body = _doors()[path]
    place = draw(st.sampled_from(_places(body)))
    kind = draw(st.sampled_from(["key", "deep", "replace"]))
    if kind == "key":
        place[draw(ANY_TEXT)] = draw(VALUES)
    elif kind == "deep":
        place[draw(st.sampled_from([*place, "metadata", "extra"]))] = draw(DEEP)
    else:
        field = draw(st.sampled_from(sorted(place)))
        place[field] = draw(ANY_TEXT | VALUES)
    # Python's json escapes a lone surrogate (\ud800) and NUL, and writes NaN/Infinity (which
    # are not JSON): as a careless client would send them.
    return path, json.dumps(body).encode()


@pytest.fixture
def server(database_url: str, fake_upstream: FakeUpstream, tmp_path: Path) -> Iterator[Any]:
    proxy = ContextgateServer(
        {
            "CONTEXTGATE_DATABASE_URL": database_url,
            "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream.base_url,
            "CONTEXTGATE_MAX_RETRIES": "0",
            "CONTEXTGATE_MEMORY_EXTRACTION_MODE": "off",
        },
        log_path=tmp_path / "server.log",
    )
    proxy.start()
    yield proxy
    proxy.stop()


def _stored(http: httpx.Client) -> tuple[int, int]:
    conversations = http.get("/v1/conversations", params={"limit": 100}).json()["data"]
    memories = http.get("/v1/memories", params={"user": "prop-user"}).json()["data"]
    return len(conversations), len(memories)


def test_arbitrary_keys_depths_and_unicode_never_5xx_nor_stored(
    server: ContextgateServer,
) -> None:
    failures: list[str] = []
    answered: list[int] = []
    with httpx.Client(base_url=server.url, timeout=60) as http:

        @given(case=hostile())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: tuple[str, bytes]) -> None:
            path, raw = case
            before = _stored(http)
            response = http.post(path, content=raw, headers={"content-type": "application/json"})
            answered.append(response.status_code)
            if response.status_code >= 500:
                failures.append(f"{path} {raw[:300]!r} -> {response.text[:300]}")
            elif response.status_code >= 400 and _stored(http) != before:
                failures.append(f"{path} {raw[:300]!r} -> {response.status_code}, stored")

        run()
    assert not failures, "\n".join(failures[:10])
    assert any(status < 300 for status in answered)
    assert any(400 <= status < 500 for status in answered)
    log = (server.log_path or Path()).read_text(errors="replace")
    assert "unhandled error" not in log
