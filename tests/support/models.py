"""A model_list config that routes named models to the fake upstream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.fake_upstream import FakeUpstream

__all__ = ["fake_model_list"]


def fake_model_list(
    tmp_path: Path,
    fake: FakeUpstream,
    names: tuple[str, ...] = ("fake-planner", "fake-summarizer"),
    model_info: dict[str, Any] | None = None,
) -> Path:
    """Write a CONTEXTGATE_CONFIG file (JSON is YAML) sending ``names`` to the fake upstream."""
    entries: list[dict[str, Any]] = []
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
