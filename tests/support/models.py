"""A model_list config that routes named models to the fake upstream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.fake_upstream import FakeUpstream

__all__ = ["ANTHROPIC_LITELLM_MODEL", "fake_model_list"]

# A Claude model litellm knows (thinking, prompt caching), reached at the fake upstream.
ANTHROPIC_LITELLM_MODEL = "anthropic/claude-sonnet-4-5-20250929"


def fake_model_list(
    tmp_path: Path,
    fake: FakeUpstream,
    names: tuple[str, ...] = ("fake-planner", "fake-summarizer"),
    model_info: dict[str, Any] | None = None,
    anthropic: tuple[str, ...] = (),
) -> Path:
    """Write a CONTEXTGATE_CONFIG file (JSON is YAML) sending ``names`` to the fake upstream's
    chat API, and ``anthropic`` names through litellm's anthropic provider to its /v1/messages."""
    entries: list[dict[str, Any]] = [
        {
            "model_name": name,
            "litellm_params": {
                "model": ANTHROPIC_LITELLM_MODEL,
                "api_base": fake.url,
                "api_key": "sk-ant-fake-upstream",
            },
        }
        for name in anthropic
    ]
    for name in names:
        entry: dict[str, Any] = {
            "model_name": name,
            "litellm_params": {
                "model": f"openai/{name}",
                "api_base": fake.base_url,
                "api_key": "sk-fake",
            },
        }
        if model_info:
            entry["model_info"] = model_info
        entries.append(entry)
    path = tmp_path / "models.yaml"
    path.write_bytes(orjson.dumps({"model_list": entries}))
    return path
