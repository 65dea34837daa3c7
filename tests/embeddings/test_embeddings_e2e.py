"""POST /v1/embeddings and the rest of /v1 on a real server, with the openai SDK.

Embeddings go through the same router, keys, per-key limits and metrics as chat; any other
path under /v1 is a 404 in OpenAI's envelope that names the endpoints served.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MASTER = "sk-master-embeddings"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(
        tmp_path_factory,
        fake_upstream_server,
        {"CONTEXTGATE_MASTER_KEY": MASTER},
        name="embeddings",
    )


def issue_key(server: ContextgateServer, **limits: object) -> str:
    response = httpx.post(
        f"{server.base_url}/keys",
        json={"name": "embedder", **limits},
        headers={"Authorization": f"Bearer {MASTER}"},
    )
    assert response.status_code in (200, 201), response.text
    key: str = response.json()["key"]
    return key


def sdk(server: ContextgateServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=30)


def prompt_tokens_metric(server: ContextgateServer, model: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    pattern = rf'contextgate_tokens_total{{direction="prompt",model="{model}"}} ([0-9.e+]+)'
    match = re.search(pattern, text)
    return float(match.group(1)) if match else 0.0


def test_embeddings_through_the_router_with_the_sdk(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    client = sdk(server, issue_key(server))
    before = prompt_tokens_metric(server, "fake-embed")
    # The SDK asks for base64 unless told otherwise and decodes it: both shapes must work.
    default = client.embeddings.create(model="fake-embed", input=["alpha beta", "gamma"])
    floats = client.embeddings.create(
        model="fake-embed", input=["alpha beta", "gamma"], encoding_format="float"
    )
    assert [item.index for item in default.data] == [0, 1]
    assert len(default.data[0].embedding) == 64
    for got, want in zip(default.data, floats.data, strict=True):
        assert got.embedding == pytest.approx(want.embedding, rel=1e-6)
    assert default.data[0].embedding != default.data[1].embedding
    assert default.usage.prompt_tokens > 0
    # Routed like chat: the upstream saw the model name and the upstream path.
    calls = [r for r in fake_upstream.requests() if r["path"].endswith("/embeddings")]
    assert len(calls) == 2
    assert calls[0]["body"]["model"] == "fake-embed"
    assert calls[0]["body"]["input"] == ["alpha beta", "gamma"]
    assert prompt_tokens_metric(server, "fake-embed") >= before + 2 * default.usage.prompt_tokens


def test_embeddings_need_a_key_and_honour_its_rpm_limit(server: ContextgateServer) -> None:
    with pytest.raises(openai.AuthenticationError):
        sdk(server, "sk-wrong").embeddings.create(model="fake-embed", input="x")
    client = sdk(server, issue_key(server, rpm_limit=1))
    client.embeddings.create(model="fake-embed", input="once")
    with pytest.raises(openai.RateLimitError):
        client.embeddings.create(model="fake-embed", input="twice")


def test_bad_embeddings_input_is_400_and_upstream_errors_map(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    client = sdk(server, issue_key(server))
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="fake-embed", input=[])
    assert fake_upstream.requests() == []
    fake_upstream.faults("fake-embed", [{"status": 400, "message": "dimensions too large"}])
    with pytest.raises(openai.BadRequestError) as failed:
        client.embeddings.create(model="fake-embed", input="x")
    assert "dimensions too large" in str(failed.value)


def test_unknown_v1_paths_are_404s_naming_the_endpoints(server: ContextgateServer) -> None:
    headers = {"Authorization": f"Bearer {MASTER}"}
    response = httpx.post(f"{server.base_url}/completions", json={}, headers=headers)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "not_found"
    assert "POST /v1/completions" in error["message"]
    for served in ("POST /v1/chat/completions", "POST /v1/embeddings", "GET /v1/models"):
        assert served in error["message"]
    assert httpx.get(f"{server.base_url}/assistants", headers=headers).status_code == 404
