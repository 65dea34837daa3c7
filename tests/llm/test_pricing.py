"""The prompt cache priced from litellm's cost map: figures by hand, and litellm's own cost
functions as the oracle for the same usage (as litellm normalises each provider's)."""

from __future__ import annotations

from typing import Any

import litellm
import pytest
from litellm.llms.anthropic.chat.transformation import AnthropicConfig
from litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini import VertexGeminiConfig
from litellm.types.utils import ModelResponse, Usage

from app.llm.model_info import _litellm_info, model_info_for
from app.llm.pricing import PromptCache, Rates, add_usage, price, prompt_cache
from app.llm.responses import normalize_completion
from app.llm.routing import Deployment

SONNET = "claude-sonnet-4-5-20250929"  # $3 in, $15 out, read $0.30, write 5m $3.75, 1h $6 (/MTok)
SPLIT = {"ephemeral_5m_input_tokens": 3000, "ephemeral_1h_input_tokens": 4000}


def _ours(model: str, usage: Usage) -> tuple[float, float]:
    """Our price of litellm's usage as contextgate's response carries it (normalised)."""
    raw = ModelResponse(choices=[{"message": {"content": "x"}}], usage=usage)
    cleaned = normalize_completion(raw, model)["usage"]
    cost = _litellm_info(model).price(cleaned)
    return cost.prompt_cost, cost.completion_cost


def _anthropic(raw: dict[str, Any]) -> Usage:
    return AnthropicConfig().calculate_usage(raw, None)


def _gemini(metadata: dict[str, Any]) -> Usage:
    return VertexGeminiConfig._calculate_usage({"usageMetadata": metadata})  # type: ignore[typeddict-item]


def test_anthropic_reads_and_5m_and_1h_writes_by_hand() -> None:
    usage = _anthropic(
        {
            "input_tokens": 100,
            "output_tokens": 50,
            "cache_read_input_tokens": 2000,
            "cache_creation_input_tokens": 7000,
            "cache_creation": SPLIT,
        }
    )
    raw = normalize_completion(ModelResponse(usage=usage), SONNET)["usage"]
    cost = _litellm_info(SONNET).price(raw)
    assert cost.cache == PromptCache(9100, 2000, 7000, 4000)
    assert cost.cache_read_cost == pytest.approx(2000 * 0.30e-6)
    assert cost.cache_write_cost == pytest.approx(3000 * 3.75e-6 + 4000 * 6e-6)
    assert cost.prompt_cost == pytest.approx(100 * 3e-6 + 2000 * 0.30e-6 + 0.03525)
    assert cost.completion_cost == pytest.approx(50 * 15e-6)
    # Not the full input price for the read, and the write's premium is paid.
    assert cost.prompt_cost != pytest.approx(9100 * 3e-6)


@pytest.mark.parametrize(
    "raw",
    [
        {"input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 2000},
        {"input_tokens": 100, "output_tokens": 50, "cache_creation_input_tokens": 7000},
        {
            "input_tokens": 100,
            "output_tokens": 50,
            "cache_read_input_tokens": 2000,
            "cache_creation_input_tokens": 7000,
            "cache_creation": SPLIT,
        },
        {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 900,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 900},
        },
    ],
)
@pytest.mark.parametrize("model", [SONNET, "claude-haiku-4-5"])
def test_anthropic_matches_litellm(model: str, raw: dict[str, Any]) -> None:
    usage = _anthropic(raw)
    expected = litellm.cost_per_token(
        model=model, custom_llm_provider="anthropic", usage_object=usage
    )
    assert _ours(model, usage) == pytest.approx(expected)


def test_anthropics_own_usage_shape_counts_input_apart_from_the_cache() -> None:
    native = {
        "input_tokens": 100,
        "output_tokens": 50,
        "cache_read_input_tokens": 2000,
        "cache_creation_input_tokens": 7000,
        "cache_creation": SPLIT,
    }
    assert prompt_cache(native) == PromptCache(9100, 2000, 7000, 4000)
    via_litellm = normalize_completion(ModelResponse(usage=_anthropic(native)), SONNET)["usage"]
    rates = _litellm_info(SONNET).rates
    assert price(rates, native) == price(rates, via_litellm)


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "gpt-4.1"])
def test_openai_cached_tokens_match_litellm(model: str) -> None:
    usage = Usage(
        prompt_tokens=5000,
        completion_tokens=200,
        total_tokens=5200,
        prompt_tokens_details={"cached_tokens": 3840},
    )
    expected = litellm.cost_per_token(model=model, custom_llm_provider="openai", usage_object=usage)
    assert _ours(model, usage) == pytest.approx(expected)


def test_openai_cached_tokens_by_hand() -> None:
    # gpt-4o: $2.50 in, $1.25 cached, $10 out (/MTok); OpenAI charges nothing to write.
    cost = _litellm_info("gpt-4o").price(
        {"prompt_tokens": 5000, "completion_tokens": 200,
         "prompt_tokens_details": {"cached_tokens": 3840}}
    )  # fmt: skip
    assert cost.prompt_cost == pytest.approx(1160 * 2.5e-6 + 3840 * 1.25e-6)
    assert cost.cache_read_cost == pytest.approx(3840 * 1.25e-6)
    assert cost.cache_write_cost == 0.0
    assert cost.completion_cost == pytest.approx(200 * 10e-6)
    # The Responses API's shape of the same usage prices the same.
    responses = {"input_tokens": 5000, "output_tokens": 200,
                 "input_tokens_details": {"cached_tokens": 3840}}  # fmt: skip
    assert _litellm_info("gpt-4o").price(responses) == cost


@pytest.mark.parametrize(
    ("model", "metadata"),
    [
        ("gemini-2.5-flash", {"promptTokenCount": 5000, "candidatesTokenCount": 100,
                              "totalTokenCount": 5100, "cachedContentTokenCount": 4000}),
        ("gemini-2.5-flash", {"promptTokenCount": 5000, "candidatesTokenCount": 100,
                              "totalTokenCount": 5100, "cachedContentTokenCount": 4000,
                              "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 5000}]}),
        ("gemini/gemini-2.5-pro", {"promptTokenCount": 5000, "candidatesTokenCount": 100,
                                   "totalTokenCount": 5100, "cachedContentTokenCount": 1024}),
        # Above 200k tokens: every rate of the tier, the cache read's included.
        ("gemini/gemini-2.5-pro", {"promptTokenCount": 250_000, "candidatesTokenCount": 100,
                                   "totalTokenCount": 250_100, "cachedContentTokenCount": 200_000}),
    ],
)  # fmt: skip
def test_gemini_implicit_hits_match_litellm(model: str, metadata: dict[str, Any]) -> None:
    usage = _gemini(metadata)
    expected = litellm.cost_per_token(model=model, custom_llm_provider="gemini", usage_object=usage)
    assert _ours(model, usage) == pytest.approx(expected)


def test_gemini_by_hand_and_its_own_field_name() -> None:
    # gemini-2.5-flash: $0.30 in, $0.03 cached, $2.50 out (/MTok).
    native = {"prompt_token_count": 5000, "cached_content_token_count": 4000,
              "completion_tokens": 100}  # fmt: skip
    cost = _litellm_info("gemini/gemini-2.5-flash").price(native)
    assert cost.prompt_cost == pytest.approx(1000 * 0.3e-6 + 4000 * 0.03e-6)
    assert cost.completion_cost == pytest.approx(100 * 2.5e-6)
    pro = _litellm_info("gemini/gemini-2.5-pro").rates
    assert pro.for_prompt(200_000)["cache_read_input_token_cost"] == 1.25e-07
    assert pro.for_prompt(200_001)["cache_read_input_token_cost"] == 2.5e-07
    assert pro.for_prompt(200_001)["input_cost_per_token"] == 2.5e-06


def test_missing_cache_rates_fall_back_like_litellm() -> None:
    entry = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
    usage = {"prompt_tokens": 1000, "completion_tokens": 10, "cache_read_input_tokens": 400,
             "cache_creation_input_tokens": 100}  # fmt: skip
    cost = price(Rates.of(entry), usage)
    assert cost.prompt_cost == pytest.approx(1000 * 1e-6)  # no cache price: plain input
    with_write = Rates.of({**entry, "cache_creation_input_token_cost": 1.25e-6})
    one_hour = {**usage, "cache_creation": {"ephemeral_1h_input_tokens": 100}}
    assert price(with_write, one_hour).cache_write_cost == pytest.approx(100 * 1.25e-6)


def test_usage_without_cache_prices_as_before() -> None:
    info = _litellm_info("gpt-4o-mini")
    cost = info.price({"prompt_tokens": 1234, "completion_tokens": 56})
    assert (cost.prompt_cost, cost.completion_cost) == pytest.approx(info.cost(1234, 56))
    assert cost.cache_read_cost == cost.cache_write_cost == 0.0


def test_usage_of_several_rounds_adds_up_with_its_cache() -> None:
    total: dict[str, Any] = {}
    round_ = {
        "prompt_tokens": 1000,
        "completion_tokens": 10,
        "total_tokens": 1010,
        "prompt_tokens_details": {"cached_tokens": 600, "cache_creation_token_details": {
            "ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0}},
        "cache_read_input_tokens": 600,
        "cache_creation_input_tokens": 100,
    }  # fmt: skip
    add_usage(total, round_)
    add_usage(total, round_)
    assert prompt_cache(total) == PromptCache(2000, 1200, 200, 0)
    rates = _litellm_info(SONNET).rates
    assert price(rates, total).prompt_cost == pytest.approx(2 * price(rates, round_).prompt_cost)


def test_a_deployments_model_info_sets_its_cache_rates() -> None:
    own = Deployment(
        "local-claude",
        "openai/local-claude",
        model_info={"input_cost_per_token": 1e-6, "cache_read_input_token_cost": 1e-7},
    )
    usage = {"prompt_tokens": 1000, "completion_tokens": 0, "cache_read_input_tokens": 600}
    assert model_info_for(own).price(usage).prompt_cost == pytest.approx(400e-6 + 600e-7)
    # On a known model, an override replaces that rate only: Sonnet's writes keep their price.
    cheaper = Deployment(
        "sonnet",
        f"anthropic/{SONNET}",
        model_info={"cache_read_input_token_cost": 0.0},
    )
    both = {**usage, "cache_creation_input_tokens": 100}
    cost = model_info_for(cheaper).price(both)
    assert cost.cache_read_cost == 0.0
    assert cost.cache_write_cost == pytest.approx(100 * 3.75e-6)
    assert cost.prompt_cost == pytest.approx(300 * 3e-6 + 100 * 3.75e-6)


def test_rates_written_as_yaml_reads_them() -> None:
    # YAML 1.1 reads 1e-6 (no dot) as a string; the config's prices still apply.
    rates = {"input_cost_per_token": "1e-6", "cache_read_input_token_cost": "1e-7"}
    own = Deployment("m", "openai/m", model_info=rates)
    usage = {"prompt_tokens": 1000, "completion_tokens": 0, "cache_read_input_tokens": 600}
    assert model_info_for(own).price(usage).prompt_cost == pytest.approx(400e-6 + 600e-7)


@pytest.mark.parametrize("shape", ["anthropic", "litellm"])
def test_a_cache_write_is_not_also_billed_as_input(shape: str) -> None:
    """The figures of litellm issue #9812 (Claude 3.7 Sonnet, same prices as Sonnet 4.5):
    Anthropic's console billed $0.05439 where double counting the write gave $0.0913."""
    native = {"input_tokens": 3, "cache_creation_input_tokens": 12304,
              "cache_read_input_tokens": 0, "output_tokens": 550}  # fmt: skip
    usage: dict[str, Any] = native
    if shape == "litellm":
        usage = normalize_completion(ModelResponse(usage=_anthropic(native)), SONNET)["usage"]
        assert usage["prompt_tokens"] == 12307  # litellm's prompt_tokens include the write
    cost = _litellm_info(SONNET).price(usage)
    assert cost.prompt_cost + cost.completion_cost == pytest.approx(0.054399)


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62},
        {"prompt_tokens": 50},
        {"completion_tokens": 3},
        {},
        {"prompt_tokens": 50.7, "completion_tokens": 2.2},
        {"prompt_tokens": True, "completion_tokens": False},
        {"prompt_tokens": "50", "total_tokens": None},
        {"prompt_tokens": -4, "completion_tokens": 1},
    ],
)
def test_a_plain_usage_prices_as_the_general_reading_does(usage: dict[str, Any]) -> None:
    """Usage with only the three counts takes a shortcut; an empty details dict beside them
    changes nothing but takes the general reading: both must agree."""
    general = {**usage, "prompt_tokens_details": {}}
    assert prompt_cache(usage) == prompt_cache(general)
    rates = _litellm_info(SONNET).rates
    assert price(rates, usage) == price(rates, general)
    tiered = _litellm_info("gemini-2.5-pro").rates
    assert tiered.tiers  # priced above 200k prompt tokens at other rates
    for tokens in (200_000, 200_001):
        assert price(tiered, {**usage, "prompt_tokens": tokens}) == price(
            tiered, {**general, "prompt_tokens": tokens}
        )
