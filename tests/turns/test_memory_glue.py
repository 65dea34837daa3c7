"""The memory glue of the turn pipeline: where the blocks go in the outgoing messages, and
when background compaction is due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.memories.retrieval import Retrieved
from app.turns.injection import inject, insert_bundle, render_context


def test_injection_modes() -> None:
    now = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)
    memories = [Retrieved("m1", "Likes tea", "preference", 7, 0.5, 0.7, now - timedelta(days=3))]
    block = render_context(memories, now)
    assert block == (
        "[CONTEXT: 2026-03-04 05:06 UTC]\n"
        "Relevant memories:\n- [preference, importance 7, 3 days ago] Likes tea"
    )
    messages = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "new"},
    ]
    prefixed = inject(messages, block, "user_prefix")
    assert prefixed[0] == messages[0]
    assert prefixed[3]["content"] == f"{block}\n\nnew"
    assert messages[3]["content"] == "new"  # the input is not modified
    appended = inject(messages, block, "system_append")
    assert appended[0]["content"] == f"Be kind.\n\n{block}"
    separate = inject(messages, block, "context_message")
    assert separate[3] == {"role": "system", "content": block}
    assert separate[4]["content"] == "new"
    parts = inject(
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "B", "user_prefix"
    )
    assert parts[0]["content"][0] == {"type": "text", "text": "B"}
    bundled = insert_bundle(messages, "[MEMORY:EPISODIC]")
    assert [m["role"] for m in bundled[:3]] == ["system", "system", "user"]


def test_compaction_ratio_per_request_then_per_model_then_default() -> None:
    from app.core.settings import Settings
    from app.turns.after_turn import compaction_ratio

    settings = Settings(compaction_ratio_by_model={"big-model": 0.6}, _env_file=None)
    assert compaction_ratio(settings, 0.5, "big-model") == 0.5
    assert compaction_ratio(settings, None, "big-model") == 0.6
    assert compaction_ratio(settings, None, "other") == 0.8
