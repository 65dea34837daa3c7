"""The inspector shows, per request, where the prompt was cut and which tool results were
cleared."""

from __future__ import annotations

import re
from typing import Any

import httpx

TOOLS: Any = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


async def test_the_timeline_shows_cuts_and_cleared_tool_results(
    client: httpx.AsyncClient,
) -> None:
    context = {
        "max_input_tokens": 4000,
        "cache": {"low_water_ratio": 0.5, "keep_tool_results": 1, "clear_at_least_tokens": 200},
    }
    messages: list[dict[str, Any]] = [{"role": "system", "content": "An agent."}]
    usages = []
    conversation_id = ""
    for step in range(10):
        # Long asks: what clearing cannot shrink grows, so the loop is cut as well.
        ask = f"Step {step}. " + "Please look again. " * 50 + "CALL_TOOL:read_file:{}"
        messages.append({"role": "user", "content": ask})
        for _ in range(2):
            body = {
                "model": "gpt-4o-mini",
                "messages": messages,
                "tools": TOOLS,
                "context": context,
            }
            response = await client.post("/v1/chat/completions", json=body)
            assert response.status_code == 200, response.text
            data = response.json()
            conversation_id = data["conversation_id"]
            usages.append(data["context_utilization"]["cache_stats"])
            answer = data["choices"][0]["message"]
            messages.append(
                {k: v for k, v in answer.items() if k in ("role", "content", "tool_calls")}
            )
            for call in answer.get("tool_calls") or []:
                content = "word " * 500
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    cleared = [c for stats in usages for c in stats["cleared_now"]]
    assert cleared, "the loop outgrew the budget and cleared a batch"
    page = await client.get(f"/ui/conversations/{conversation_id}")
    assert page.status_code == 200
    html = page.text
    assert html.count('class="prompt-cache"') == len(usages)
    assert 'data-prefix-kept="yes"' in html
    assert 'data-prefix-kept="no"' in html
    assert "cleared now:" in html
    for item in cleared:
        assert re.search(
            rf"read_file {item['tool_call_id']}</span> \({item['tokens']} tokens", html
        )
    assert "tool results sent as placeholders" in html
    # Where the prompt was cut: the first message kept and how many were dropped.
    cuts = [stats for stats in usages if stats["cut"]]
    assert cuts, "the loop went below what clearing alone could keep"
    for stats in cuts:
        assert stats["messages_dropped"] > 0
        assert (
            f"<b>cut</b>: history from message #{stats['cut_at_sequence']}, "
            f"{stats['messages_dropped']} messages dropped"
        ) in html
    assert html.count("<b>cut</b>: history from message #") == len(cuts)
