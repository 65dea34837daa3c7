"""The agent-sized scenario of ``python -m bench.run`` (issue 26): a ~150k-token tool loop.

Each target gets the same task (bench/agent_prompt.py: 50 tool results of ~2,900 tokens after a
~2,000-token system prompt, one more tool step per call, the whole history resent): a first
call that brings the history (not measured: contextgate stores it), then ``calls`` measured
calls, one at a time. Doors: ``/v1/chat/completions``, ``/v1/messages`` and ``/v1/responses``
on contextgate; the first two on LiteLLM proxy (it has no Responses door for this model; its
``/v1/messages`` goes to an Anthropic deployment on the fake's own Messages API, because 1.106
sends an OpenAI-compatible model's Messages calls to a Responses API the fake lacks); and
the same prompt in chat form straight to the fake upstream ("direct": what both proxies send
upstream). Per call: wall time (p50) and the server's CPU time (user + system, from /proc),
which a busy machine distorts less. Added time = the target's p50 minus direct's, same round.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

import httpx
import orjson

from bench.agent_prompt import AgentTask, answer_of
from bench.services import cpu_seconds

__all__ = ["DOORS", "run_task"]

DOORS = {"chat": "chat/completions", "messages": "messages", "responses": "responses"}


def run_task(
    client: httpx.Client,
    base_url: str,
    door: str,
    calls: int,
    pid: int | None,
    model: str | None = None,
) -> dict[str, Any]:
    """One agent task against ``base_url`` on ``door`` (``direct``: chat form, upstream);
    ``model``: another model name than the scenario's."""
    task = AgentTask(run=uuid.uuid4().hex[:8])
    path = DOORS["chat" if door == "direct" else door]
    shape = "chat" if door == "direct" else door

    def call() -> float:
        payload = task.body(shape)
        if model is not None:
            payload["model"] = model
        body = orjson.dumps(payload)
        started = time.perf_counter()
        response = client.post(
            f"{base_url}/{path}", content=body, headers={"content-type": "application/json"}
        )
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"{door} {base_url}: {response.status_code} {response.text[:300]}")
        answer = answer_of(shape, orjson.loads(response.content))
        if not answer.get("tool_calls"):
            raise RuntimeError(f"{door} on {base_url}: the loop ended: {answer}")
        task.answered(answer)
        return elapsed

    call()  # brings the whole history (contextgate stores it): not measured
    time.sleep(0.5)  # the first call's after-answer work
    cpu_before = cpu_seconds(pid) if pid else 0.0
    walls = [call() for _ in range(calls)]
    time.sleep(0.5)  # the last call's after-answer work counts too
    cpu_ms = (cpu_seconds(pid) - cpu_before) * 1000 / calls if pid else float("nan")
    return {
        "p50_ms": statistics.median(walls),
        "mean_ms": statistics.fmean(walls),
        "server_cpu_ms": cpu_ms,
        "calls": calls,
        "body_kib": len(orjson.dumps(task.body(shape))) / 1024,
    }
