"""The provider's prompt cache priced right, through the running server, on all three doors.

The fake upstream reports cache usage as each provider does: Anthropic's reads and writes at
``cache_control`` breakpoints (writes split 5-minute / 1-hour by ``ttl``), OpenAI's
``cached_tokens`` for a model whose name contains "cacher", Gemini's ``cachedContentTokenCount``.
The prices are litellm's cost map: Claude Sonnet 4.5 ($3 in, $0.30 read, $3.75 5m write, $6 1h
write, $15 out per MTok); for the "cacher" deployment (``base_model: gpt-4o``) GPT-4o ($2.50 in,
$1.25 read, $10 out); Gemini 2.5 Flash ($0.30 in, $0.03 read, $2.50 out).
Each response's ``cost``, the key's spend (GET /v1/keys), /metrics and the inspector agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from app.cli import app as cli_app
from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.models import ANTHROPIC_LITELLM_MODEL
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MASTER = "sk-master-cache-cost"
CLAUDE = "claude-cache"
CACHER = "gpt-cacher"
NATIVE = "gpt-cacher-native"  # on OpenAI's own Responses API (the native path)
GEMINI = "gemini-flash"
SONNET = {"in": 3e-6, "read": 0.3e-6, "w5m": 3.75e-6, "w1h": 6e-6, "out": 15e-6}
GPT4O = {"in": 2.5e-6, "read": 1.25e-6, "out": 10e-6}
FLASH = {"in": 0.3e-6, "read": 0.03e-6, "out": 2.5e-6}
SYSTEM = "You are a careful assistant who answers briefly. " * 40
ONE_HOUR: Any = {"type": "ephemeral", "ttl": "1h"}
FIVE_MIN: Any = {"type": "ephemeral"}


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    directory: Path = tmp_path_factory.mktemp("cache-cost-models")
    entries = [
        {
            "model_name": CLAUDE,
            "litellm_params": {
                "model": ANTHROPIC_LITELLM_MODEL,
                "api_base": fake_upstream_server.url,
                "api_key": "sk-ant-fake-upstream",
            },
        },
        {
            "model_name": GEMINI,
            "litellm_params": {
                "model": "gemini/gemini-2.5-flash",
                "api_base": f"{fake_upstream_server.url}/v1beta",
                "api_key": "fake-gemini-key",
            },
        },
        {
            "model_name": NATIVE,
            "litellm_params": {
                "model": f"openai/{NATIVE}",
                "api_base": fake_upstream_server.base_url,
                "api_key": "sk-fake",
            },
            "model_info": {"base_model": "gpt-4o", "responses_api": True},
        },
        {
            "model_name": CACHER,
            "litellm_params": {
                "model": f"openai/{CACHER}",
                "api_base": fake_upstream_server.base_url,
                "api_key": "sk-fake",
            },
            "model_info": {"base_model": "gpt-4o"},
        },
    ]
    config = directory / "models.yaml"
    config.write_bytes(orjson.dumps({"model_list": entries}))
    env = {"CONTEXTGATE_CONFIG": str(config), "CONTEXTGATE_MASTER_KEY": MASTER}
    yield from module_server(tmp_path_factory, fake_upstream_server, env, name="cache-cost")


@pytest.fixture
def key(server: ContextgateServer, fake_upstream: FakeUpstream) -> str:
    """A new virtual key (its own tenant) for each test, so that its spend is the test's."""
    response = httpx.post(
        f"{server.url}/v1/keys",
        json={"name": "cache-cost", "max_budget": 10.0},
        headers={"Authorization": f"Bearer {MASTER}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


def spend(server: ContextgateServer, key: str) -> float:
    listing = httpx.get(
        f"{server.url}/v1/keys", headers={"Authorization": f"Bearer {MASTER}"}, timeout=30
    ).json()
    [row] = [k for k in listing["data"] if key.startswith(k["key_prefix"].rstrip(".…"))]
    return float(row["spend"])


def scrape(server: ContextgateServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def inspector(server: ContextgateServer, conversation_id: str) -> str:
    page = httpx.get(
        f"{server.url}/ui/conversations/{conversation_id}",
        headers={"Authorization": f"Bearer {MASTER}"},
        timeout=30,
    )
    assert page.status_code == 200
    return page.text


def check_anthropic_cost(usage: dict[str, Any], cost: dict[str, Any]) -> None:
    """``cost`` is the Anthropic usage at Sonnet's rates: reads at 0.1x, writes at 1.25x / 2x."""
    split = usage["cache_creation"]
    write_5m, write_1h = split["ephemeral_5m_input_tokens"], split["ephemeral_1h_input_tokens"]
    assert write_5m + write_1h == usage["cache_creation_input_tokens"]
    read_cost = usage["cache_read_input_tokens"] * SONNET["read"]
    write_cost = write_5m * SONNET["w5m"] + write_1h * SONNET["w1h"]
    assert cost["cache_read_cost"] == pytest.approx(read_cost)
    assert cost["cache_write_cost"] == pytest.approx(write_cost)
    assert cost["prompt_cost"] == pytest.approx(
        usage["input_tokens"] * SONNET["in"] + read_cost + write_cost
    )
    assert cost["completion_cost"] == pytest.approx(usage["output_tokens"] * SONNET["out"])
    assert cost["total_cost"] == pytest.approx(
        cost["prompt_cost"] + cost["completion_cost"] + cost["planning_cost"]
    )
    everything = (
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
    )
    assert cost["prompt_cost"] != pytest.approx(everything * SONNET["in"])  # not the flat price


def test_anthropic_reads_and_5m_and_1h_writes_on_the_messages_door(
    server: ContextgateServer, key: str
) -> None:
    before = scrape(server)
    client = anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0, timeout=60)
    system: Any = [{"type": "text", "text": SYSTEM, "cache_control": ONE_HOUR}]
    first_ask: Any = [{"type": "text", "text": "First question?", "cache_control": FIVE_MIN}]
    messages: Any = [{"role": "user", "content": first_ask}]
    first = client.messages.create(model=CLAUDE, max_tokens=100, system=system, messages=messages)
    data = first.model_dump()
    usage, cost = data["usage"], (first.model_extra or {})["cost"]
    # Written: the system prompt for an hour, the question after it for 5 minutes.
    assert usage["cache_creation"]["ephemeral_1h_input_tokens"] > 0
    assert usage["cache_creation"]["ephemeral_5m_input_tokens"] > 0
    assert usage["cache_read_input_tokens"] == 0
    check_anthropic_cost(usage, cost)
    assert cost["cache_write_cost"] > 0
    stats = (first.model_extra or {})["context_utilization"]["cache_stats"]
    assert stats["cache_write_tokens"] == usage["cache_creation_input_tokens"]
    assert stats["cache_write_1h_tokens"] == usage["cache_creation"]["ephemeral_1h_input_tokens"]
    assert stats["cache_write_cost"] == pytest.approx(cost["cache_write_cost"])

    # The next turn, streamed: the marked prefix is read back at the read price.
    messages += [
        {"role": "assistant", "content": first.content[0].text},  # type: ignore[union-attr]
        {"role": "user", "content": "Second question?"},
    ]
    with client.messages.stream(
        model=CLAUDE, max_tokens=100, system=system, messages=messages
    ) as stream:
        events = [event.model_dump() for event in stream]
    delta = next(e for e in events if e["type"] == "message_delta")
    usage2, cost2 = delta["usage"], delta["cost"]
    assert usage2["cache_read_input_tokens"] == usage["cache_creation_input_tokens"]
    check_anthropic_cost(usage2, cost2)
    assert cost2["cache_read_cost"] > 0

    # A new conversation, streamed, with another 1-hour system prompt: written at 2x.
    other: Any = [{"type": "text", "text": "Another system. " * 80, "cache_control": ONE_HOUR}]
    with client.messages.stream(
        model=CLAUDE, max_tokens=100, system=other, messages=[{"role": "user", "content": "Hi"}]
    ) as stream:
        events = [event.model_dump() for event in stream]
    delta = next(e for e in events if e["type"] == "message_delta")
    usage3, cost3 = delta["usage"], delta["cost"]
    assert usage3["cache_creation"]["ephemeral_1h_input_tokens"] > 0
    check_anthropic_cost(usage3, cost3)
    client.close()

    costs = [cost, cost2, cost3]
    assert spend(server, key) == pytest.approx(sum(c["total_cost"] for c in costs))
    after = scrape(server)

    def grew(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    reads = usage2["cache_read_input_tokens"]
    one_hour = usage["cache_creation"]["ephemeral_1h_input_tokens"]
    five_min = usage["cache_creation"]["ephemeral_5m_input_tokens"]
    labels = {"model": CLAUDE}
    assert grew("contextgate_prompt_cache_tokens_total", kind="read", **labels) == reads
    assert grew("contextgate_prompt_cache_tokens_total", kind="write_1h", **labels) == (
        one_hour + usage3["cache_creation"]["ephemeral_1h_input_tokens"]
    )
    assert grew("contextgate_prompt_cache_tokens_total", kind="write_5m", **labels) >= five_min
    assert grew("contextgate_prompt_cache_cost_usd_total", kind="read", **labels) == (
        pytest.approx(sum(c["cache_read_cost"] for c in costs))
    )
    assert grew("contextgate_prompt_cache_cost_usd_total", kind="write", **labels) == (
        pytest.approx(sum(c["cache_write_cost"] for c in costs))
    )
    assert grew("contextgate_cost_usd_total", kind="prompt", **labels) == pytest.approx(
        sum(c["prompt_cost"] for c in costs)
    )

    html = inspector(server, data["conversation_id"])
    assert html.count('class="provider-cache"') == 2
    assert f'data-read-tokens="{reads}"' in html
    assert f"{five_min} for 5 min, {one_hour} for 1 h" in html
    assert f"(${cost2['cache_read_cost']:.6f})" in html
    # The operator's command line says the same.
    cli = CliRunner().invoke(
        cli_app,
        ["conversations", "show", data["conversation_id"]],
        env={"CONTEXTGATE_DATABASE_URL": server.env["CONTEXTGATE_DATABASE_URL"], "COLUMNS": "250"},
    )
    assert cli.exit_code == 0, cli.output
    assert (
        f"provider cache: read 0 ($0.000000), wrote {five_min + one_hour} ({one_hour} for 1 h)"
        in (cli.output)
    )
    assert f"provider cache: read {reads} (${cost2['cache_read_cost']:.6f})" in cli.output
    listing = CliRunner().invoke(
        cli_app,
        ["keys", "list"],
        env={**{k: server.env[k] for k in ("CONTEXTGATE_DATABASE_URL", "CONTEXTGATE_MASTER_KEY")},
             "COLUMNS": "250"},
    )  # fmt: skip
    assert listing.exit_code == 0, listing.output
    assert f"${spend(server, key):.4f}" in listing.output


def check_openai_cost(prompt: int, cached: int, completion: int, cost: dict[str, Any]) -> None:
    """``cost`` is the usage at GPT-4o's rates: cached tokens at half the input price."""
    assert cost["cache_read_cost"] == pytest.approx(cached * GPT4O["read"])
    assert cost["cache_write_cost"] == 0.0  # OpenAI does not charge for writing its cache
    assert cost["prompt_cost"] == pytest.approx(
        (prompt - cached) * GPT4O["in"] + cached * GPT4O["read"]
    )
    assert cost["completion_cost"] == pytest.approx(completion * GPT4O["out"])


def test_openai_cached_tokens_on_the_chat_door_streamed_and_not(
    server: ContextgateServer, key: str
) -> None:
    before = scrape(server)
    sdk = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=60)
    messages: Any = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "First question?"},
    ]
    first = sdk.chat.completions.create(model=CACHER, messages=messages)
    extra = first.model_extra or {}
    assert first.usage is not None
    assert extra["cost"]["cache_read_cost"] == 0.0  # nothing was cached yet
    check_openai_cost(first.usage.prompt_tokens, 0, first.usage.completion_tokens, extra["cost"])
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Second question?"},
    ]
    chunks = list(
        sdk.chat.completions.create(
            model=CACHER,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    last = chunks[-1]
    assert last.usage is not None
    assert last.usage.prompt_tokens_details is not None
    cached = last.usage.prompt_tokens_details.cached_tokens or 0
    assert 0 < cached < last.usage.prompt_tokens
    cost = (last.model_extra or {})["cost"]
    check_openai_cost(last.usage.prompt_tokens, cached, last.usage.completion_tokens, cost)
    stats = (last.model_extra or {})["context_utilization"]["cache_stats"]
    assert stats["cached_tokens"] == cached
    assert stats["cache_read_cost"] == pytest.approx(cost["cache_read_cost"])
    sdk.close()

    costs = [extra["cost"], cost]
    assert spend(server, key) == pytest.approx(sum(c["total_cost"] for c in costs))
    after = scrape(server)
    read = "contextgate_prompt_cache_tokens_total"
    grew = metric(after, read, model=CACHER, kind="read") - metric(
        before, read, model=CACHER, kind="read"
    )
    assert grew == cached
    html = inspector(server, extra["conversation_id"])
    assert html.count('class="provider-cache"') == 1  # the first call read nothing
    assert f'data-read-tokens="{cached}"' in html


def test_the_responses_door_prices_cached_tokens_streamed_and_not(
    server: ContextgateServer, key: str
) -> None:
    sdk = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=60)
    first = sdk.responses.create(model=CACHER, instructions=SYSTEM, input="First question?")
    first_cost = (first.model_extra or {})["cost"]
    assert first.usage is not None
    check_openai_cost(first.usage.input_tokens, 0, first.usage.output_tokens, first_cost)
    second = sdk.responses.create(
        model=CACHER, instructions=SYSTEM, input="Second question?", previous_response_id=first.id
    )
    assert second.usage is not None
    cached = second.usage.input_tokens_details.cached_tokens
    assert cached > 0
    second_cost = (second.model_extra or {})["cost"]
    check_openai_cost(second.usage.input_tokens, cached, second.usage.output_tokens, second_cost)
    events = list(
        sdk.responses.create(
            model=CACHER,
            instructions=SYSTEM,
            input="Third question?",
            previous_response_id=second.id,
            stream=True,
        )
    )
    done = events[-1]
    assert done.type == "response.completed"
    response = done.response
    assert response.usage is not None
    cached3 = response.usage.input_tokens_details.cached_tokens
    assert cached3 > cached
    third_cost = (response.model_extra or {})["cost"]
    check_openai_cost(
        response.usage.input_tokens, cached3, response.usage.output_tokens, third_cost
    )
    sdk.close()
    costs = [first_cost, second_cost, third_cost]
    assert spend(server, key) == pytest.approx(sum(c["total_cost"] for c in costs))


def test_openai_cached_tokens_on_the_native_responses_path(
    server: ContextgateServer, key: str, fake_upstream: FakeUpstream
) -> None:
    sdk = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=60)
    first = sdk.responses.create(model=NATIVE, instructions=SYSTEM, input="First question?")
    second = sdk.responses.create(
        model=NATIVE, instructions=SYSTEM, input="Second question?", previous_response_id=first.id
    )
    events = list(
        sdk.responses.create(
            model=NATIVE,
            instructions=SYSTEM,
            input="Third question?",
            previous_response_id=second.id,
            stream=True,
        )
    )
    sdk.close()
    native = [r for r in fake_upstream.requests() if r["path"] == "/v1/responses"]
    assert len(native) == 3  # each call went to the Responses API itself
    third = events[-1].response  # type: ignore[union-attr]
    costs = []
    for response in (second, third):
        assert response.usage is not None
        cached = response.usage.input_tokens_details.cached_tokens
        assert cached > 0
        cost = (response.model_extra or {})["cost"]
        check_openai_cost(response.usage.input_tokens, cached, response.usage.output_tokens, cost)
        costs.append(cost)
    costs.append((first.model_extra or {})["cost"])
    assert spend(server, key) == pytest.approx(sum(c["total_cost"] for c in costs))


def test_claude_on_the_chat_and_responses_doors_is_billed_its_cache(
    server: ContextgateServer, key: str
) -> None:
    """contextgate's own breakpoints (5-minute): written at 1.25x, then read at 0.1x."""
    sdk = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=60)
    messages: Any = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "First question?"},
    ]
    first = sdk.chat.completions.create(model=CLAUDE, messages=messages, max_tokens=100)
    costs = [(first.model_extra or {})["cost"]]
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Second question?"},
    ]
    chunks = list(
        sdk.chat.completions.create(
            model=CLAUDE,
            messages=messages,
            max_tokens=100,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    costs.append((chunks[-1].model_extra or {})["cost"])
    reply = sdk.responses.create(
        model=CLAUDE, instructions=SYSTEM, input="A question?", max_output_tokens=100
    )
    costs.append((reply.model_extra or {})["cost"])
    streamed = list(
        sdk.responses.create(
            model=CLAUDE,
            instructions=SYSTEM,
            input="Another question?",
            previous_response_id=reply.id,
            max_output_tokens=100,
            stream=True,
        )
    )
    costs.append((streamed[-1].response.model_extra or {})["cost"])  # type: ignore[union-attr]
    sdk.close()
    usages = [
        first.usage.model_dump() if first.usage else {},
        chunks[-1].usage.model_dump() if chunks[-1].usage else {},
        reply.usage.model_dump() if reply.usage else {},
        streamed[-1].response.usage.model_dump(),  # type: ignore[union-attr]
    ]
    for usage, cost in zip(usages, costs, strict=True):
        if "prompt_tokens" in usage:  # chat: cached_tokens are reads, writes beside them
            prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
            read = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            write = usage.get("cache_creation_input_tokens") or 0
        else:  # Responses: input_tokens_details
            prompt, completion = usage["input_tokens"], usage["output_tokens"]
            details = usage["input_tokens_details"]
            read, write = details["cached_tokens"], details.get("cache_write_tokens") or 0
        assert read or write, usage
        assert cost["cache_read_cost"] == pytest.approx(read * SONNET["read"])
        assert cost["cache_write_cost"] == pytest.approx(write * SONNET["w5m"])
        uncached = prompt - read - write
        assert cost["prompt_cost"] == pytest.approx(
            uncached * SONNET["in"] + read * SONNET["read"] + write * SONNET["w5m"]
        )
        assert cost["completion_cost"] == pytest.approx(completion * SONNET["out"])
    assert costs[1]["cache_read_cost"] > 0
    assert costs[3]["cache_read_cost"] > 0
    assert spend(server, key) == pytest.approx(sum(c["total_cost"] for c in costs))


def test_gemini_implicit_hits_on_the_chat_and_messages_doors(
    server: ContextgateServer, key: str, fake_upstream: FakeUpstream
) -> None:
    before = scrape(server)
    sdk = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=60)
    messages: Any = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "First question?"},
    ]
    first = sdk.chat.completions.create(model=GEMINI, messages=messages)
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Second question?"},
    ]
    chunks = list(
        sdk.chat.completions.create(
            model=GEMINI, messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    sdk.close()
    calls = [r for r in fake_upstream.requests() if r["path"].startswith("/v1beta/models/")]
    assert [r["path"].rsplit(":", 1)[1] for r in calls] == [
        "generateContent",
        "streamGenerateContent",
    ]
    costs = [(first.model_extra or {})["cost"], (chunks[-1].model_extra or {})["cost"]]
    usages = [first.usage, chunks[-1].usage]
    reads = []
    for usage, cost in zip(usages, costs, strict=True):
        assert usage is not None
        details = usage.prompt_tokens_details
        read = (details.cached_tokens if details else 0) or 0
        reads.append(read)
        assert cost["cache_read_cost"] == pytest.approx(read * FLASH["read"])
        assert cost["cache_write_cost"] == 0.0
        assert cost["prompt_cost"] == pytest.approx(
            (usage.prompt_tokens - read) * FLASH["in"] + read * FLASH["read"]
        )
        assert cost["completion_cost"] == pytest.approx(usage.completion_tokens * FLASH["out"])
    assert reads[0] == 0
    assert reads[1] > 0  # the first prompt came back as the second's prefix

    # The Anthropic door on the same Gemini model: its usage counts the read apart.
    client = anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0, timeout=60)
    ask: Any = [{"role": "user", "content": "A question for the messages door?"}]
    once = client.messages.create(model=GEMINI, max_tokens=100, system=SYSTEM, messages=ask)
    again = client.messages.create(
        model=GEMINI,
        max_tokens=100,
        system=SYSTEM,
        messages=[
            *ask,
            {"role": "assistant", "content": once.content[0].text},  # type: ignore[union-attr]
            {"role": "user", "content": "And a follow-up?"},
        ],
    )
    client.close()
    usage = again.usage
    assert usage.cache_read_input_tokens
    cost = (again.model_extra or {})["cost"]
    assert cost["prompt_cost"] == pytest.approx(
        usage.input_tokens * FLASH["in"] + usage.cache_read_input_tokens * FLASH["read"]
    )
    costs += [(once.model_extra or {})["cost"], cost]
    assert spend(server, key) == pytest.approx(sum(c["total_cost"] for c in costs))
    after = scrape(server)
    name = "contextgate_prompt_cache_tokens_total"
    grew = metric(after, name, model=GEMINI, kind="read") - metric(
        before, name, model=GEMINI, kind="read"
    )
    assert grew == reads[1] + usage.cache_read_input_tokens
