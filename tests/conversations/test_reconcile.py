"""Conversation identity: whole-message hashes, the hash chain and which messages are new."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.conversations.fingerprint import (
    canonical_message,
    chain_hashes,
    content_hash,
    matches_prefix,
    new_messages_start,
)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def start_for(stored: list[dict[str, Any]], incoming: list[dict[str, Any]]) -> int:
    """new_messages_start as the service calls it for a conversation known by id."""
    stored_hashes = [content_hash(m) for m in stored]
    incoming_hashes = [content_hash(m) for m in incoming]
    system_count = 0
    while system_count < len(stored) and stored[system_count]["role"] in ("system", "developer"):
        system_count += 1
    return new_messages_start(
        stored_count=len(stored),
        stored_head=chain_hashes(stored_hashes)[-1] if stored else "",
        incoming_hashes=incoming_hashes,
        stored_tail_hashes=stored_hashes[-len(incoming_hashes) :],
        stored_system_hashes=stored_hashes[:system_count],
    )


STORED = [system("be brief"), user("hi"), assistant("Echo: hi"), user("more"), assistant("ok")]


# --- canonical hashes ---------------------------------------------------------------------------


def test_assistant_echo_with_refusal_none_hashes_like_the_stored_answer() -> None:
    stored = {"role": "assistant", "content": "Echo: hi"}
    echoed = {
        "role": "assistant",
        "content": "Echo: hi",
        "refusal": None,
        "audio": None,
        "function_call": None,
        "annotations": [],
        "reasoning_content": "thoughts the client may or may not echo",
    }
    assert content_hash(echoed) == content_hash(stored)


def test_text_content_parts_hash_like_a_plain_string() -> None:
    parts = {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    assert content_hash(parts) == content_hash(user("hello"))
    split = {
        "role": "user",
        "content": [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}],
    }
    assert content_hash(split) == content_hash(user("hello"))


def test_empty_content_and_none_are_the_same_for_a_tool_call_message() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    echoed_calls = [{"index": 0, **calls[0]}]
    a = {"role": "assistant", "content": None, "tool_calls": calls}
    b = {"role": "assistant", "content": "", "tool_calls": echoed_calls, "refusal": None}
    assert content_hash(a) == content_hash(b)


def test_every_part_of_a_message_counts() -> None:
    base = {"role": "user", "content": "same"}
    variants = [
        {"role": "assistant", "content": "same"},
        {"role": "user", "content": "same "},
        {"role": "user", "content": "same", "name": "bob"},
        {"role": "tool", "content": "same", "tool_call_id": "c1"},
        {"role": "tool", "content": "same", "tool_call_id": "c2"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
    ]
    hashes = {content_hash(base), *(content_hash(v) for v in variants)}
    assert len(hashes) == len(variants) + 1
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    other_args = {**call, "function": {"name": "f", "arguments": '{"a": 2}'}}
    assert content_hash({"role": "assistant", "tool_calls": [call]}) != content_hash(
        {"role": "assistant", "tool_calls": [other_args]}
    )


def test_long_messages_that_share_a_long_start_do_not_collide() -> None:
    prefix = "x" * 5000
    assert content_hash(user(prefix + "a")) != content_hash(user(prefix + "b"))


def test_canonical_form_keeps_only_what_identifies_a_message() -> None:
    assert canonical_message({"role": "user", "content": "hi", "extra": 1}) == {
        "role": "user",
        "content": "hi",
    }


# --- the chain ----------------------------------------------------------------------------------


def test_chain_identifies_the_whole_sequence() -> None:
    a = chain_hashes(content_hash(m) for m in [user("hi"), assistant("1"), user("x")])
    b = chain_hashes(content_hash(m) for m in [user("hi"), assistant("2"), user("x")])
    assert a[0] == b[0]  # same first message
    assert a[1] != b[1]
    assert a[2] != b[2]  # an equal later message does not make the chains meet again
    # Order matters.
    c = chain_hashes(content_hash(m) for m in [assistant("1"), user("hi")])
    assert c[1] != a[1]


def test_matches_prefix_needs_the_whole_stored_sequence() -> None:
    stored = chain_hashes(content_hash(m) for m in STORED)
    incoming = chain_hashes(content_hash(m) for m in [*STORED, user("new")])
    assert matches_prefix(stored[-1], len(STORED), incoming)
    assert not matches_prefix(stored[-1], len(STORED), incoming[:3])
    edited = [*STORED[:3], user("MORE"), *STORED[4:], user("new")]
    assert not matches_prefix(
        stored[-1], len(STORED), chain_hashes(content_hash(m) for m in edited)
    )


# --- which incoming messages are new ------------------------------------------------------------


def test_full_history_client() -> None:
    assert start_for(STORED, [*STORED, user("new")]) == len(STORED)


def test_new_messages_only_client() -> None:
    assert start_for(STORED, [user("new")]) == 0
    assert start_for(STORED, [user("new"), user("and more")]) == 0


def test_new_message_equal_to_an_old_one_is_still_new() -> None:
    assert start_for(STORED, [user("hi")]) == 0
    assert start_for(STORED, [user("more")]) == 0


def test_repeated_system_prompt_is_not_stored_again() -> None:
    assert start_for(STORED, [system("be brief"), user("new")]) == 1


def test_changed_system_prompt_is_new() -> None:
    assert start_for(STORED, [system("be verbose"), user("new")]) == 0


def test_retry_that_repeats_the_last_answer() -> None:
    assert start_for(STORED, [assistant("ok"), user("new")]) == 1
    assert start_for(STORED, [user("more"), assistant("ok"), user("new")]) == 2


def test_sliding_window_client_behind_the_system_prompt() -> None:
    window = [system("be brief"), user("more"), assistant("ok"), user("new")]
    assert start_for(STORED, window) == 3


def test_tool_results_sent_after_a_tool_call_answer() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    stored = [user("use the tool"), {"role": "assistant", "content": None, "tool_calls": [call]}]
    result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    assert start_for(stored, [result]) == 0
    assert start_for(stored, [*stored, result]) == 2


# --- property: whatever the client sends, each message is stored once --------------------------

TEXTS = st.sampled_from(["hi", "ok", "more", "Echo: hi", "x"])  # few texts: collisions on purpose


@st.composite
def stored_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [system(draw(TEXTS)) for _ in range(draw(st.integers(0, 2)))]
    for _ in range(draw(st.integers(1, 6))):
        messages.extend([user(draw(TEXTS)), assistant(draw(TEXTS))])
    return messages


@settings(max_examples=400, deadline=None)
@given(
    stored=stored_conversations(),
    new_text=TEXTS,
    mode=st.sampled_from(["full", "new", "system+new", "overlap", "system+overlap"]),
    data=st.data(),
)
def test_each_message_is_stored_once(
    stored: list[dict[str, Any]], new_text: str, mode: str, data: st.DataObject
) -> None:
    system_count = sum(1 for m in stored if m["role"] == "system")
    new = [user(new_text)]
    overlap = data.draw(st.integers(1, len(stored) - system_count))
    incoming, expected = {
        "full": (stored + new, len(stored)),
        "new": (new, 0),
        "system+new": (stored[:system_count] + new, system_count),
        "overlap": (stored[-overlap:] + new, overlap),
        "system+overlap": (
            stored[:system_count] + stored[-overlap:] + new,
            system_count + overlap,
        ),
    }[mode]
    start = start_for(stored, incoming)
    assert start == expected
    # What gets stored is the stored conversation followed by exactly the new message.
    assert incoming[start:] == new
