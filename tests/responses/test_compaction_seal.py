"""The seal of compaction items and the door's context decisions, without a server."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from app.core.errors import BadRequest
from app.core.settings import Settings
from app.responses.compaction_seal import SealedCompaction, open_seal, seal
from app.responses.management import compact_threshold, managed_context
from app.responses.schemas import ResponsesRequest

SEALED = SealedCompaction("conv_abc", 12)


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_a_seal_opens_for_its_tenant_only() -> None:
    config = settings(secret_key=SecretStr("s3cret"))
    content = seal(config, "tenant-a", SEALED)
    assert content.startswith("cgc1.")
    assert "tenant-a" not in content
    assert open_seal(config, "tenant-a", content, "input.0") == SEALED
    with pytest.raises(BadRequest) as refused:
        open_seal(config, "tenant-b", content, "input.0")
    assert refused.value.code == "invalid_compaction_item"
    assert refused.value.param == "input.0"


@pytest.mark.parametrize(
    "content",
    ["", "gAAAAAB-openai", "cgc1.", "cgc1.a.b", "cgc1.!!.??", "cgc1.e30.e30.e30"],
)
def test_anything_else_is_refused(content: str) -> None:
    with pytest.raises(BadRequest):
        open_seal(settings(), "tenant-a", content, "input.0")


def test_the_key_follows_the_settings() -> None:
    by_secret = seal(settings(secret_key=SecretStr("one")), "t", SEALED)
    with pytest.raises(BadRequest):  # another deployment's secret
        open_seal(settings(secret_key=SecretStr("two")), "t", by_secret, "input.0")
    by_master = seal(settings(master_key=SecretStr("sk-master")), "t", SEALED)
    assert open_seal(settings(master_key=SecretStr("sk-master")), "t", by_master, "x") == SEALED
    # Without either, the database URL keys it: stable across restarts of one deployment.
    plain = seal(settings(), "t", SEALED)
    assert open_seal(settings(), "t", plain, "x") == SEALED
    with pytest.raises(BadRequest):
        open_seal(settings(database_url="sqlite+aiosqlite:///./other.db"), "t", plain, "x")


def test_context_management_validation() -> None:
    assert compact_threshold(None) is None
    assert compact_threshold([{"type": "compaction"}]) is None
    entries = [
        {"type": "compaction", "compact_threshold": 9000},
        {"type": "compaction", "compact_threshold": 4000},
    ]
    assert compact_threshold(entries) == 4000
    for bad in ({"type": "compaction", "compact_threshold": 0}, {"type": "clear"}):
        with pytest.raises(BadRequest):
            compact_threshold([bad])
    with pytest.raises(BadRequest):
        compact_threshold([{"type": "compaction", "compact_threshold": True}])


def test_store_false_is_managed_by_default_and_passed_through_on_request() -> None:
    body = ResponsesRequest(model="m", input="hi", store=False)
    context, notes = managed_context(settings(), body)
    assert context.enabled
    assert "managed" in notes[0]
    strict = settings(responses_store_false="passthrough")
    body = ResponsesRequest(
        model="m",
        input="hi",
        store=False,
        truncation="auto",
        context_management=[{"type": "compaction", "compact_threshold": 5000}],
    )
    context, notes = managed_context(strict, body)
    assert not context.enabled
    assert context.max_input_tokens is None  # nothing managed, nothing mapped
    assert any("not applied" in note for note in notes)


def test_the_threshold_is_the_budget_unless_the_request_asks_for_less() -> None:
    body = ResponsesRequest(
        model="m",
        input="hi",
        context_management=[{"type": "compaction", "compact_threshold": 5000}],
    )
    assert managed_context(settings(), body)[0].max_input_tokens == 5000
    smaller = body.model_copy(
        update={"context": body.context.model_copy(update={"max_input_tokens": 3000})}
    )
    assert managed_context(settings(), smaller)[0].max_input_tokens == 3000
