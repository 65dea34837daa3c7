"""The cross-tenant probe of ``python -m bench.probe``: tenant B reaching for tenant A's data.

Tenant A (one virtual key) stores a conversation by each door, a response, an attachment and a
long-term memory of user "alice". Tenant B (another key) then asks for each by id, on every
route that takes one, continues them (``conversation_id``, ``X-Conversation-Id``,
``previous_response_id``, ``attachment_id``, the same leading messages), deletes them, lists
them, and chats as "alice". A failure is a status other than the one expected (404 for someone
else's id), A's text or id in B's answer or in what the upstream got for B, or A's data gone
afterwards.
"""

from __future__ import annotations

from typing import Any

import httpx

from bench.probe_cases import MODEL
from tests.fake_upstream import FakeUpstream

__all__ = ["cross_tenant"]

SECRET_TEXT = "tenant-a-private-7d41c9"
MEMORY_TEXT = "alice likes green tea 5be2f0"


def _key(http: httpx.Client, name: str) -> dict[str, str]:
    issued = http.post("/v1/keys", json={"name": name}).json()
    return {"Authorization": f"Bearer {issued['key']}", "id": issued["id"]}


def _tenant_a(http: httpx.Client, a: dict[str, str]) -> dict[str, str]:
    headers = {"Authorization": a["Authorization"]}
    messages = [{"role": "user", "content": f"remember {SECRET_TEXT}"}]

    def post(path: str, body: dict[str, Any]) -> dict[str, str]:
        answer = http.post(path, headers=headers, json=body)
        answer.raise_for_status()
        fields: dict[str, str] = answer.json()
        conversation = answer.headers.get("x-conversation-id")
        return {**fields, "conversation_id": conversation} if conversation else fields

    chat = post("/v1/chat/completions", {"model": MODEL, "messages": messages, "user": "alice"})
    anthropic = post("/v1/messages", {"model": MODEL, "max_tokens": 16, "messages": messages})
    response = post("/v1/responses", {"model": MODEL, "input": f"note {SECRET_TEXT}"})
    attachment = post("/v1/attachments", {"content": SECRET_TEXT, "title": "private"})
    memory = post("/v1/memories", {"user": "alice", "content": MEMORY_TEXT})
    return {
        "conv": chat["conversation_id"], "conv_messages": anthropic["conversation_id"],
        "conv_responses": response["conversation_id"], "resp": response["id"],
        "att": attachment["id"], "mem": memory["id"], "key": a["id"],
    }  # fmt: skip


def _attempts(ids: dict[str, str]) -> list[tuple[str, str, Any, tuple[int, ...]]]:
    """(method, path, JSON body or None, the statuses that are right)."""
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    same_start = {"model": MODEL, "messages": [
        {"role": "user", "content": f"remember {SECRET_TEXT}"},
        {"role": "assistant", "content": f"Echo: remember {SECRET_TEXT}"},
        {"role": "user", "content": "and now?"}]}  # fmt: skip
    anthropic = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    found: list[tuple[str, str, Any, tuple[int, ...]]] = []
    for conv in (ids["conv"], ids["conv_messages"], ids["conv_responses"]):
        found += [
            ("GET", f"/v1/conversations/{conv}", None, (404,)),
            ("DELETE", f"/v1/conversations/{conv}", None, (404,)),
            ("POST", f"/v1/conversations/{conv}/save", {"user": "alice"}, (404,)),
            ("POST", "/v1/chat/completions", {**chat, "conversation_id": conv}, (404,)),
            ("POST", "/v1/chat/completions", {**chat, "stream": True, "conversation_id": conv},
             (404,)),
            ("POST", "/v1/messages", {**anthropic, "conversation_id": conv}, (404,)),
            ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "conversation_id": conv},
             (404,)),
            ("HEADER", "/v1/chat/completions", {**chat, "_conv": conv}, (404,)),
        ]  # fmt: skip
    resp, att, mem = ids["resp"], ids["att"], ids["mem"]
    found += [
        ("GET", f"/v1/responses/{resp}", None, (404,)),
        ("GET", f"/v1/responses/{resp}/input_items", None, (404,)),
        ("DELETE", f"/v1/responses/{resp}", None, (404,)),
        ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "previous_response_id": resp},
         (404,)),
        ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "stream": True,
                                   "previous_response_id": resp}, (404,)),
        ("GET", f"/v1/attachments/{att}", None, (404,)),
        ("DELETE", f"/v1/attachments/{att}", None, (404,)),
        ("POST", "/v1/chat/completions", {**chat, "attachments": [{"attachment_id": att}]},
         (404,)),
        ("DELETE", f"/v1/memories/{mem}", None, (404,)),
        ("GET", "/v1/memories?user=alice", None, (200,)),
        ("DELETE", "/v1/memories?user=alice", None, (200,)),
        ("POST", "/v1/chat/completions", {**chat, "user": "alice"}, (200,)),
        ("GET", "/v1/conversations", None, (200,)),
        ("POST", "/v1/chat/completions", same_start, (200,)),  # last: B's text is A's here
        ("GET", "/v1/keys", None, (401, 403)),
        ("DELETE", f"/v1/keys/{ids['key']}", None, (401, 403)),
    ]  # fmt: skip
    return found


def _leaks(text: str, sent: str, ids: dict[str, str]) -> bool:
    """A's text or ids in ``text``, other than what B itself sent."""
    found = [SECRET_TEXT, MEMORY_TEXT, *ids.values()]
    return any(value in text for value in found if value not in sent)


def cross_tenant(http: httpx.Client, fake: FakeUpstream) -> tuple[int, int]:
    a, b = _key(http, "tenant-a"), _key(http, "tenant-b")
    ids = _tenant_a(http, a)
    b_auth = {"Authorization": b["Authorization"]}
    failures = 0
    attempts = _attempts(ids)
    for method, path, body, statuses in attempts:
        fake.reset()
        headers = dict(b_auth)
        if method == "HEADER":
            method, headers["X-Conversation-Id"] = "POST", body.pop("_conv")
        answer = http.request(method, path, headers=headers, json=body)
        upstream, sent = repr(fake.requests()), path + repr(body) + repr(headers)
        bad = answer.status_code not in statuses or _leaks(answer.text + upstream, sent, ids)
        if bad:
            print(f"  FAIL tenant {method} {path} -> {answer.status_code} {answer.text[:160]}")
        failures += bool(bad)
    a_auth = {"Authorization": a["Authorization"]}
    still = [
        http.get(f"/v1/conversations/{ids['conv']}", headers=a_auth).status_code == 200,
        http.get(f"/v1/responses/{ids['resp']}", headers=a_auth).status_code == 200,
        http.get(f"/v1/attachments/{ids['att']}", headers=a_auth).status_code == 200,
        MEMORY_TEXT in http.get("/v1/memories?user=alice", headers=a_auth).text,
    ]
    return len(attempts) + len(still), failures + still.count(False)
