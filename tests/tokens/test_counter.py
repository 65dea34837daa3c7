"""Token counting works offline (encodings bundled with litellm) and counts chat messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import app.tokens.counter as counter_module
from app.core.offline import bundled_tiktoken_dir
from app.tokens.counter import MESSAGE_OVERHEAD, REPLY_PRIMER, TokenCounter, text_of

counter = TokenCounter()


def test_encodings_come_from_the_bundled_directory() -> None:
    bundled = bundled_tiktoken_dir()
    assert bundled is not None
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(bundled)


def test_counting_in_a_fresh_process_needs_no_network(tmp_path: Path) -> None:
    """A new interpreter, no tiktoken cache of its own, proxies pointing nowhere: still counts."""
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env.update(
        HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9", HOME=str(tmp_path)
    )
    script = (
        "import app\n"
        "from app.tokens.counter import TokenCounter\n"
        "c = TokenCounter()\n"
        "print(c.count_text('hello world', 'gpt-4o'), c.count_text('hello world', 'llama3'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "2"]


def test_model_names_pick_an_encoding() -> None:
    assert counter.encoding("gpt-4o-mini").name == "o200k_base"
    assert counter.encoding("openai/gpt-4o").name == "o200k_base"
    assert counter.encoding("gpt-4").name == "cl100k_base"
    assert counter.encoding("some-local-model").name == "cl100k_base"


def test_text_of_content_shapes() -> None:
    assert text_of(None) == ""
    assert text_of("hi") == "hi"
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]
    assert text_of(parts) == "a"


def test_message_counts_overhead_content_name_and_tool_calls() -> None:
    model = "gpt-4o-mini"
    text = counter.count_text("hello there", model)
    assert counter.count_message({"role": "user", "content": "hello there"}, model) == (
        MESSAGE_OVERHEAD + text
    )
    named = counter.count_message({"role": "user", "content": "hello there", "name": "bob"}, model)
    assert named > MESSAGE_OVERHEAD + text
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
    with_call = counter.count_message(
        {"role": "assistant", "content": None, "tool_calls": [call]}, model
    )
    assert with_call > MESSAGE_OVERHEAD + 5
    image = [{"type": "image_url", "image_url": {"url": "data:..."}}]
    assert counter.count_message({"role": "user", "content": image}, model) >= 85


def test_conversation_count_adds_the_reply_primer() -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    model = "gpt-4o-mini"
    assert counter.count_messages(messages, model) == REPLY_PRIMER + sum(
        counter.count_message(m, model) for m in messages
    )


def test_special_tokens_in_user_text_are_counted_not_rejected() -> None:
    assert counter.count_text("<|endoftext|>", "gpt-4o") > 0


def test_a_short_text_counted_again_is_not_encoded_again() -> None:
    fresh = TokenCounter()
    first = fresh.count_text("hello 0 turn 3", "gpt-4o")
    again = fresh.count_text("hello 0 " + "turn 3", "gpt-4o")  # equal text, another object
    assert again == first
    assert fresh.encoded_texts == 1
    assert fresh.count_text("hello 0 turn 3", "gpt-4") == first  # another encoding: counted
    assert fresh.encoded_texts == 2


def test_short_texts_never_push_a_long_text_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(counter_module, "_SHORT_ENTRIES", 16)
    monkeypatch.setattr(counter_module, "_CACHE_ENTRIES", 16)
    fresh = TokenCounter()
    long_text = "a long tool result " * 100
    fresh.count_text(long_text, "gpt-4o")
    for n in range(100):
        fresh.count_text(f"short text {n}", "gpt-4o")
    encoded = fresh.encoded_texts
    fresh.count_text(long_text, "gpt-4o")
    assert fresh.encoded_texts == encoded  # still remembered
    fresh.count_text("short text 0", "gpt-4o")  # the oldest short one went: bounded
    assert fresh.encoded_texts == encoded + 1
