"""The Messages door reads common message shapes straight from the JSON (app/messages/plain.py)
and validates the rest of the body once (app/messages/body.py): whatever it accepts, the models
accept and translate to the same chat form; whatever the models refuse, the door refuses with
the models' own errors."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from app.messages.body import MessagesBody
from app.messages.plain import plain_messages
from app.messages.schemas import MessagesRequest
from app.messages.translate import chat_messages, to_turn_request
from app.turns.planning import incoming_messages

CC = {"type": "ephemeral", "ttl": "5m"}

TEXTS = st.sampled_from(["x", "a longer text\n", "é", ""])
IDS = st.sampled_from(["toolu_1", "call_2"])
MARKS = st.sampled_from([None, CC, "absent", "absent"])


def _marked(draw: st.DrawFn, block: dict[str, Any]) -> dict[str, Any]:
    mark = draw(MARKS)
    if mark != "absent":
        block["cache_control"] = mark
    if draw(st.integers(0, 4)) == 0:
        block["citations"] = None  # a key the door does not read
    return block


@st.composite
def user_blocks(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "tool_result", "tool_result", "image"]))
    if kind == "text":
        return _marked(draw, {"type": "text", "text": draw(TEXTS)})
    if kind == "image":
        return {"type": "image", "source": {"type": "url", "url": "http://i"}}
    inner = st.lists(
        st.builds(lambda text: {"type": "text", "text": text}, TEXTS).map(
            lambda part: {**part, "cache_control": CC} if part["text"] == "x" else part
        ),
        max_size=2,
    )
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": draw(IDS)}
    content = draw(st.sampled_from(["absent", None]) | TEXTS | inner)
    if content != "absent":
        block["content"] = content
    is_error = draw(st.sampled_from(["absent", True, False, None]))
    if is_error != "absent":
        block["is_error"] = is_error
    return _marked(draw, block)


@st.composite
def assistant_blocks(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "tool_use", "tool_use", "thinking", "redacted"]))
    if kind == "text":
        return _marked(draw, {"type": "text", "text": draw(TEXTS)})
    if kind == "tool_use":
        arguments = draw(st.sampled_from([{}, {"path": "a.py"}, {"n": [1, 2.5, None], "é": {}}]))
        block = {"type": "tool_use", "id": draw(IDS), "name": "read", "input": arguments}
        return _marked(draw, block)
    if kind == "thinking":
        signature = draw(st.sampled_from(["", "sig=="]))
        return {"type": "thinking", "thinking": draw(TEXTS), "signature": signature}
    return {"type": "redacted_thinking", "data": draw(TEXTS)}


@st.composite
def valid_messages(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant"]))
    parts = user_blocks() if role == "user" else assistant_blocks()
    content = draw(st.lists(parts, min_size=1, max_size=3) | TEXTS.filter(bool))
    return {"role": role, "content": content}


# One thing wrong, somewhere: (path in a message, what to put there).
BREAKS: list[tuple[tuple[str | int, ...], Any]] = [
    (("role",), "system"),
    (("content",), ""),
    (("content",), []),
    (("content",), None),
    (("content",), 3),
    (("name",), "bob"),
    (("content", 0, "type"), "video"),
    (("content", 0, "type"), "tool_use"),  # a block in the other role's message
    (("content", 0, "type"), "tool_result"),
    (("content", 0, "type"), "thinking"),
    (("content", 0, "text"), 3),
    (("content", 0, "id"), ""),
    (("content", 0, "tool_use_id"), ""),
    (("content", 0, "input"), "s"),
    (("content", 0, "is_error"), "true"),
    (("content", 0, "is_error"), 1),
    (("content", 0, "is_error"), 0),
    (("content", 0, "is_error"), []),
    (("content", 0, "content"), 5),
    (("content", 0, "content"), [{"type": "text", "text": 5}]),
    (("content", 0, "cache_control"), "ephemeral"),
    (("content", 0, "signature"), None),
    (("content", 0, "data"), None),
    (("content", 0), "text"),
]


def _break_at(message: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    """Put ``value`` at ``path`` in ``message``, where the path exists up to its last step."""
    target: Any = message
    for step in path[:-1]:
        if isinstance(target, dict) and step in target:
            target = target[step]
        elif isinstance(target, list) and isinstance(step, int) and step < len(target):
            target = target[step]
        else:
            return
    last = path[-1]
    if isinstance(target, dict):
        target[last] = value
    elif isinstance(target, list) and isinstance(last, int) and last < len(target):
        target[last] = value


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    history = draw(st.lists(valid_messages(), min_size=1, max_size=4))
    if draw(st.booleans()):
        path, value = draw(st.sampled_from(BREAKS))
        _break_at(history[draw(st.integers(0, len(history) - 1))], path, value)
    return history


HISTORIES = histories() | st.sampled_from([None, "hi", {}, []])


def _items(message: object) -> object:
    """A message with its keys in order, all the way down (what JSON encoding sees)."""
    if isinstance(message, dict):
        return [(key, _items(value)) for key, value in message.items()]
    if isinstance(message, list):
        return [_items(value) for value in message]
    return message


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HISTORIES)
def test_what_is_read_plainly_is_what_the_models_translate(history: Any) -> None:
    _check(history)


def _check(history: Any) -> None:
    """What ``plain_messages`` vouches for the models accept, and translate to the same."""
    plain = plain_messages(history)
    body = {"model": "claude", "max_tokens": 10, "messages": history}
    try:
        validated = MessagesRequest.model_validate(body)
    except ValidationError:
        assert plain is None  # never vouched for what the models refuse
        return
    if plain is None:  # images, and values the models coerce (such as "true")
        return
    assert _items(plain) == _items(chat_messages(validated))
    # what the pipeline reads of the turn: the door's chat form, or the models dumped
    plain_turn = to_turn_request(validated, plain)
    models_turn = to_turn_request(validated)
    models_turn._chat_form = None
    # (a message's own keys in any order: the pipeline reads them by name, never encodes them)
    plain_incoming = [sorted(_items(m)) for m in incoming_messages(plain_turn)]  # type: ignore[arg-type]
    assert plain_incoming == [sorted(_items(m)) for m in incoming_messages(models_turn)]  # type: ignore[arg-type]
    assert plain_turn.model_dump() == models_turn.model_dump()


def _agent_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Fix the tests."},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look first.", "signature": "sig=="},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "def f(): ..."},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "boom"}],
                    "is_error": True,
                    "cache_control": CC,
                },
                {"type": "text", "text": "go on", "cache_control": CC},
            ],
        },
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "abc"},
            {"type": "thinking", "thinking": "unsigned", "signature": ""},
            {"type": "text", "text": "Done", "cache_control": CC},
        ]},
    ]  # fmt: skip


def test_an_agent_history_is_read_plainly() -> None:
    history = _agent_history()
    assert plain_messages(history) is not None
    _check(history)


def test_every_break_of_every_block() -> None:
    """Each thing wrong (BREAKS) at each message and block of an agent history: never
    vouched for unless the models accept it too, and then translated alike."""
    size = len(_agent_history())
    for index in range(size):
        for block in range(4):
            for path, value in BREAKS:
                history = _agent_history()
                moved = tuple(block if step == 0 else step for step in path)
                _break_at(history[index], moved, value)
                _check(history)


BODY = TypeAdapter(Annotated[MessagesBody, Body()])
MODELS = TypeAdapter(MessagesRequest)
GOOD = [{"role": "user", "content": "hi"}]


def _errors(adapter: TypeAdapter[Any], body: object) -> list[dict[str, Any]] | None:
    try:
        adapter.validate_python(body)
    except ValidationError as error:
        return [
            {k: v for k, v in e.items() if k != "ctx"} | {"ctx": str(e.get("ctx"))}
            for e in error.errors()
        ]
    return None


def test_a_refused_body_gets_the_models_errors() -> None:
    bad_bodies: list[object] = [
        {"model": "c", "max_tokens": 0, "messages": GOOD},  # plain messages, a bad field
        {"model": "", "messages": GOOD},
        {"model": "c", "max_tokens": 9, "messages": GOOD, "thinking": {"type": "enabled"}},
        {"model": "c", "max_tokens": 9, "messages": GOOD,
         "thinking": {"type": "enabled", "budget_tokens": 50}},  # model-level validator
        {"model": "c", "max_tokens": 9, "messages": [{"role": "user", "content": ""}]},
        {"model": "c", "max_tokens": 9, "temperature": 3, "messages": [
            {"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b",
                                          "input": {}}]},
        ]},
        {"model": "c", "max_tokens": 9, "messages": []},
        {"model": "c", "max_tokens": 9},
        [GOOD],
        "text",
        None,
    ]  # fmt: skip
    for body in bad_bodies:
        expected = _errors(MODELS, body)
        assert expected is not None, body
        assert _errors(BODY, body) == expected, body


def test_the_turn_is_the_same_either_way() -> None:
    body = {
        "model": "claude",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": CC}],
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"city": "Oslo"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"},
            ]},
        ],
        "tools": [{"name": "get", "input_schema": {"type": "object"}}],
        "metadata": {"user_id": "u1"},
        "stream": True,
        "top_k": 3,
        "conversation_id": "conv_1",
        "unknown_field": [1],
    }  # fmt: skip
    parsed = BODY.validate_python(body)
    assert parsed.chat is not None  # read plainly
    models = MessagesRequest.model_validate(body)
    plain_turn = to_turn_request(parsed.request, parsed.chat)
    assert plain_turn.model_dump() == to_turn_request(models).model_dump()
    assert parsed.validated().model_dump(mode="json") == models.model_dump(mode="json")
    parsed.request.conversation_id = "from_header"
    assert parsed.validated().conversation_id == "from_header"


def test_shapes_the_models_translate_go_to_the_models() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "http://i"}}
    body = {"model": "c", "max_tokens": 9, "messages": [{"role": "user", "content": [image]}]}
    parsed = BODY.validate_python(body)
    assert parsed.chat is None
    assert parsed.request.messages[0].content[0].type == "image"  # type: ignore[union-attr]
    assert parsed.validated() is parsed.request


def test_the_models_chat_form_is_read_as_their_dump() -> None:
    """A request the models translate (an image) keeps their chat form too: what the pipeline
    reads of it is what dumping the validated messages gives."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    history = [
        {
            "role": "user",
            "content": [image, {"type": "text", "text": "what?", "cache_control": CC}],
        },
        *_agent_history()[1:],
    ]
    turn = to_turn_request(
        MessagesRequest.model_validate({"model": "c", "max_tokens": 9, "messages": history})
    )
    assert turn.chat_form is not None
    dumped = turn.model_copy()
    dumped._chat_form = None
    assert [sorted(_items(m)) for m in incoming_messages(turn)] == [  # type: ignore[arg-type]
        sorted(_items(m))  # type: ignore[arg-type]
        for m in incoming_messages(dumped)
    ]
