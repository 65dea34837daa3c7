"""Responses tools in the chat form: function tools (namespaces flattened, hosted tools left
to the native path) and ``tool_choice``."""

from __future__ import annotations

from pydantic import ValidationError

from app.core.errors import BadRequest
from app.responses.schemas import FunctionTool
from app.wire.chat import ChatTool, FunctionDefinition, NamedToolChoice
from app.wire.json import JSONObject

__all__ = ["chat_tool", "chat_tool_choice", "function_tools"]


def function_tools(tools: list[JSONObject] | None, where: str = "tools") -> list[FunctionTool]:
    """The function tools of a request, namespaces flattened; hosted tools left out."""
    found: list[FunctionTool] = []
    for index, tool in enumerate(tools or ()):
        kind = tool.get("type")
        if kind == "function":
            try:
                found.append(FunctionTool.model_validate(tool))
            except ValidationError as error:
                raise BadRequest(
                    f"Invalid function tool: {error.errors()[0].get('msg')}",
                    param=f"{where}.{index}",
                    code="invalid_tool",
                ) from None
        elif kind == "namespace":
            inner = tool.get("tools")
            if not isinstance(inner, list) or not all(isinstance(t, dict) for t in inner):
                raise BadRequest(
                    "A namespace tool's 'tools' must be a list of tool objects.",
                    param=f"{where}.{index}.tools",
                    code="invalid_tool",
                )
            found += function_tools(inner, f"{where}.{index}.tools")
        elif not isinstance(kind, str):
            raise BadRequest("Every tool needs a 'type'.", param=f"{where}.{index}")
    return found


def chat_tool(tool: FunctionTool) -> ChatTool:
    function: FunctionDefinition = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    function["parameters"] = tool.parameters or {"type": "object", "properties": {}}
    if tool.strict is not None:
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


def chat_tool_choice(choice: str | JSONObject) -> str | NamedToolChoice:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    if choice.get("type") in ("auto", "none", "required"):
        return str(choice["type"])
    raise BadRequest(
        "tool_choice must be 'auto', 'none', 'required' or {'type': 'function', 'name': …}.",
        param="tool_choice",
        code="unsupported_tool_choice",
    )
