"""POST/GET/DELETE /v1/attachments: JSON and multipart, extraction, limits, tenancy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.core.settings import Settings
from app.keys.caller import Caller
from tests.attachments.pdf import text_pdf


@pytest.fixture
async def api(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> httpx.AsyncClient:
    client: httpx.AsyncClient = await client_for(make_settings(max_attachment_bytes=2000))
    return client


async def test_json_upload_is_stored_once_per_content(api: httpx.AsyncClient) -> None:
    body = {"content": "The launch is on Tuesday.", "title": "plan", "source": "wiki"}
    first = await api.post("/v1/attachments", json=body)
    assert first.status_code == 201, first.text
    info = first.json()
    assert info["id"].startswith("att_")
    assert info["title"] == "plan"
    assert info["char_count"] == len(body["content"])
    again = await api.post("/v1/attachments", json={**body, "title": "other"})
    assert again.status_code == 200
    assert again.json()["id"] == info["id"]
    got = (await api.get(f"/v1/attachments/{info['id']}")).json()
    assert got["content"] == body["content"]


@pytest.mark.parametrize(
    ("filename", "content_type", "data", "expected"),
    [
        ("notes.txt", "text/plain", b"plain words", "plain words"),
        ("notes.md", "application/octet-stream", b"# Title\n\ntext", "# Title\n\ntext"),
        ("t.csv", "text/csv", b"a,b\n1,2\n", "a,b\n1,2\n"),
        ("d.json", "application/json", b'{"k": 1}', '{"k": 1}'),
        (
            "page.html",
            "text/html",
            b"<html><head><style>p{}</style><script>x()</script></head>"
            b"<body><h1>Hello</h1><p>World &amp; more</p></body></html>",
            "Hello\nWorld & more",
        ),
        (
            "doc.pdf",
            "application/pdf",
            text_pdf("Quarterly revenue rose"),
            "Quarterly revenue rose",
        ),
    ],
)
async def test_multipart_files_become_text(
    api: httpx.AsyncClient, filename: str, content_type: str, data: bytes, expected: str
) -> None:
    response = await api.post(
        "/v1/attachments",
        files={"file": (filename, data, content_type)},
        data={"source": "upload"},
    )
    assert response.status_code == 201, response.text
    info = response.json()
    assert info["filename"] == filename
    assert info["source"] == "upload"
    content = (await api.get(f"/v1/attachments/{info['id']}")).json()["content"]
    assert content.strip() == expected.strip()


async def test_unsupported_type_is_415(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/attachments", files={"file": ("x.png", b"\x89PNG....", "image/png")}
    )
    assert response.status_code == 415
    error = response.json()["error"]
    assert "image/png" in error["message"]
    assert error["code"] == "unsupported_media_type"
    raw = await api.post("/v1/attachments", content=b"x", headers={"content-type": "text/plain"})
    assert raw.status_code == 415


async def test_too_large_is_413(api: httpx.AsyncClient) -> None:
    big = b"x" * 2001
    response = await api.post("/v1/attachments", files={"file": ("big.txt", big, "text/plain")})
    assert response.status_code == 413
    assert "CONTEXTGATE_MAX_ATTACHMENT_BYTES" in response.json()["error"]["message"]
    as_json = await api.post("/v1/attachments", json={"content": "y" * 2001})
    assert as_json.status_code == 413


async def test_bad_input_is_400(api: httpx.AsyncClient) -> None:
    assert (await api.post("/v1/attachments", json={"title": "no content"})).status_code == 400
    empty = await api.post("/v1/attachments", files={"file": ("e.txt", b"   ", "text/plain")})
    assert empty.status_code == 400
    bad_json = await api.post("/v1/attachments", files={"file": ("b.json", b"{", "text/json")})
    assert bad_json.status_code == 400


async def test_other_tenant_and_unknown_ids_are_404(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> None:
    client: httpx.AsyncClient = await client_for(make_settings(master_key="sk-master"))
    state = client._transport.app.state.contextgate  # type: ignore[attr-defined]

    async def resolve(key: str) -> Caller | None:
        return Caller("tenant-b", key_id="key_b") if key == "sk-b" else None

    state.key_resolver = resolve
    owner = {"authorization": "Bearer sk-master"}
    other = {"authorization": "Bearer sk-b"}
    created = await client.post("/v1/attachments", json={"content": "secret"}, headers=owner)
    attachment_id = created.json()["id"]
    assert (await client.get(f"/v1/attachments/{attachment_id}", headers=other)).status_code == 404
    assert (
        await client.delete(f"/v1/attachments/{attachment_id}", headers=other)
    ).status_code == 404
    # The same text is a separate attachment for the other tenant.
    theirs = await client.post("/v1/attachments", json={"content": "secret"}, headers=other)
    assert theirs.status_code == 201
    assert theirs.json()["id"] != attachment_id
    chat = await client.post(
        "/v1/chat/completions",
        headers=other,
        json={
            "model": "fake-model",
            "messages": [{"role": "user", "content": "hi"}],
            "attachments": [{"attachment_id": attachment_id}],
        },
    )
    assert chat.status_code == 404
    deleted = await client.delete(f"/v1/attachments/{attachment_id}", headers=owner)
    assert deleted.json() == {"id": attachment_id, "object": "attachment", "deleted": True}
    assert (await client.get(f"/v1/attachments/{attachment_id}", headers=owner)).status_code == 404
    assert (await client.get("/v1/attachments/att_nope", headers=owner)).status_code == 404
