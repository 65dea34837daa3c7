"""The cache-aware fit's policy per model: a model_list entry's ``model_info.context_cache``
between the deployment's settings and the request's ``context.cache`` (issue 14.3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.context.cache_policy import cache_policy
from app.core.settings import Settings
from app.llm.routing import ConfigError, load_model_list
from app.protocol.chat import CacheOptions
from tests.context.test_tools_budget import BUDGET, _loop, tool_list
from tests.fake_upstream import FakeUpstream

MODEL = "agent-model"


def _config(tmp_path: Path, fake: FakeUpstream | None, context_cache: Any) -> Path:
    entry = {
        "model_name": MODEL,
        "litellm_params": {
            "model": f"openai/{MODEL}",
            "api_base": fake.base_url if fake else "http://127.0.0.1:9/v1",
            "api_key": "sk-fake",
        },
        "model_info": {"context_cache": context_cache},
    }
    path = tmp_path / "models.yaml"
    path.write_bytes(orjson.dumps({"model_list": [entry]}))  # JSON is YAML
    return path


def test_the_request_wins_over_the_model_which_wins_over_the_settings() -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, cache_high_water_ratio=0.75, cache_keep_tool_results=2,
        cache_exclude_tools=["todo_write"],
    )  # fmt: skip
    model = CacheOptions(high_water_ratio=0.6, keep_tool_results=4, exclude_tools=["grep"])
    policy = cache_policy(settings, CacheOptions(), model)
    assert policy.high_water_ratio == 0.6
    assert policy.keep_tool_results == 4
    assert policy.low_water_ratio == settings.cache_low_water_ratio
    request = CacheOptions(keep_tool_results=1, exclude_tools=["read_file"])
    policy = cache_policy(settings, request, model)
    assert policy.keep_tool_results == 1
    assert policy.high_water_ratio == 0.6
    assert policy.high_water_of_room  # the operator's mark: a share of the room left
    explicit = cache_policy(settings, CacheOptions(high_water_ratio=0.3), model)
    assert not explicit.high_water_of_room  # the request's: a share of the whole budget
    # Protected tools add up: no level can unprotect another's.
    assert policy.exclude_tools == {"todo_write", "grep", "read_file"}


def test_a_model_list_entry_carries_its_policy_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    deployments, _ = load_model_list(_config(tmp_path, None, {"high_water_ratio": 0.5}))
    assert deployments[0].cache == CacheOptions(high_water_ratio=0.5)
    with pytest.raises(ConfigError) as raised:
        load_model_list(_config(tmp_path, None, {"high_water_ratio": 2, "bogus": 1}))
    message = str(raised.value)
    assert "model_list[0].model_info.context_cache" in message
    assert "high_water_ratio" in message
    assert "bogus" in message


async def test_a_models_excluded_tools_are_never_cleared(
    tmp_path: Path,
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    config = _config(tmp_path, fake_upstream, {"exclude_tools": ["tool_0"]})
    client = await client_for(make_settings(config=config))
    cache = {"keep_tool_results": 1, "clear_at_least_tokens": 100}
    usages = await _loop(client, 10, {"max_input_tokens": BUDGET, "cache": cache}, tool_list(1, 5))
    assert any(u["cache_stats"]["cut"] for u in usages), "the loop had to cut, not clear"
    assert all(not u["cache_stats"]["cleared_now"] for u in usages)


async def test_a_model_can_turn_the_cache_aware_fit_off(
    tmp_path: Path,
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(
        make_settings(config=_config(tmp_path, fake_upstream, {"enabled": False}))
    )
    usages = await _loop(client, 3, {"max_input_tokens": BUDGET}, tool_list(1, 5))
    # The previous fit reports no cache-aware state: no history start, never a kept prefix.
    assert all(u["cache_stats"]["cut_at_sequence"] is None for u in usages)
    assert not any(u["cache_stats"]["prefix_kept"] for u in usages)
