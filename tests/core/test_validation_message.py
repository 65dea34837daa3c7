"""A body that fails validation is reported at the client's own field path, once.

Pydantic reports a value that fits no member of a union once per member, with the member's
label in the location; before, the first of them won, so a bad Responses input item was
reported as "Invalid request at 'input.str': Input should be a valid string (and 1 more)".
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from app.core.validation import client_path, validation_message
from app.messages.schemas import MessagesRequest
from app.protocol.chat import ChatCompletionRequest
from app.responses.schemas import ResponsesRequest


def _message(model: type[BaseModel], body: dict[str, Any]) -> tuple[str, str | None]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    # as FastAPI reports them: the location starts with "body"
    errors = [{**error, "loc": ("body", *error["loc"])} for error in caught.value.errors()]
    return validation_message(errors)


@pytest.mark.parametrize(
    ("model", "body", "param", "says"),
    [
        (
            ResponsesRequest,
            {"model": "m", "input": [{"type": "bogus"}]},
            "input.0",
            "may be of type 'message', 'function_call'",
        ),
        (
            ResponsesRequest,
            {"model": "m", "input": [{"type": "function_call_output", "output": "x"}]},
            "input.0.call_id",
            "Field required",
        ),
        (
            ResponsesRequest,
            {"model": "m", "input": [{"role": "user", "content": 5}]},
            "input.0.content",
            "Input should be a valid string or a valid list",
        ),
        (
            ResponsesRequest,
            {"model": "m", "input": 5},
            "input",
            "Input should be a valid string or a valid list",
        ),
        (
            MessagesRequest,
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{}]}]},
            "messages.0.content.0",
            "Unable to extract tag using discriminator 'type'",
        ),
        (
            MessagesRequest,
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "tool_result"}]}],
            },
            "messages.0.content.0.tool_use_id",
            "Field required",
        ),
        (ChatCompletionRequest, {"model": "m", "messages": "hello"}, "messages", "valid list"),
    ],
)
def test_the_error_that_applies_at_the_clients_path(
    model: type[BaseModel], body: dict[str, Any], param: str, says: str
) -> None:
    message, reported = _message(model, body)
    assert reported == param
    assert message.startswith(f"Invalid request at '{param}': ")
    assert says in message
    assert "more)" not in message  # the union's other members are not "more" errors
    assert "[" not in reported
    assert "str" not in reported.split(".")


def test_errors_elsewhere_are_still_counted() -> None:
    message, param = _message(
        ResponsesRequest, {"input": [{"type": "function_call_output", "output": "x"}]}
    )
    assert param == "input.0.call_id"
    assert message.endswith("(and 1 more)")  # the missing model


def test_client_path_drops_member_labels_and_tags() -> None:
    union = "list[tagged-union[MessageItem,FunctionCallItem]]"
    assert client_path(("body", "input", union, 3, "function_call", "call_id")) == [
        "input",
        "3",
        "call_id",
    ]
    assert client_path(("body", "input", "str")) == ["input"]
    assert client_path(("body", "tools", 0, "tagged-union[A,B]", "function", "name")) == [
        "tools",
        "0",
        "name",
    ]
    assert client_path(("body", "context", "max_input_tokens")) == ["context", "max_input_tokens"]


def test_invalid_json_is_said_so() -> None:
    errors = [{"type": "json_invalid", "loc": ("body", 12), "msg": "JSON decode error"}]
    assert validation_message(errors) == ("Request body is not valid JSON.", None)


@pytest.mark.parametrize(
    ("error", "says"),
    [
        ({"type": "missing", "loc": ("body",), "msg": "Field required"}, "needs a JSON body"),
        (
            {"type": "model_attributes_type", "loc": ("body",), "msg": "Input should be a dict"},
            "must be a JSON object",
        ),
    ],
)
def test_a_body_that_is_not_an_object(error: dict[str, Any], says: str) -> None:
    message, param = validation_message([error])
    assert says in message
    assert param is None
