"""At start, the tokenizers of the models a model_list serves and an embedded embedder slow to
load (WordLlama) are loaded on worker threads (the first request would otherwise wait ~0.4 s
for tiktoken's o200k_base), while the server is already ready; no other tokenizer is built
(each costs 45-70 MB), and MiniLM (~20-40 ms to load, ~9 MB) waits for its first use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = """
import asyncio, os
os.environ["CONTEXTGATE_DATABASE_URL"] = "sqlite+aiosqlite:///{db}"
os.environ["CONTEXTGATE_UPSTREAM_BASE_URL"] = "http://127.0.0.1:9/v1"
if {config!r}:
    os.environ["CONTEXTGATE_CONFIG"] = {config!r}
os.environ["CONTEXTGATE_EMBEDDER"] = {embedder!r}
import tiktoken.registry
from app.main import create_app

async def main():
    app = create_app()
    async with app.router.lifespan_context(app):
        state = app.state.contextgate
        await asyncio.gather(*list(state.background))
        at_start = state.embedder._loaded
        await state.embedder.embed(["a first use"])
        print(
            ",".join(sorted(tiktoken.registry.ENCODINGS)) or "-",
            type(state.embedder).__name__,
            at_start,
            state.embedder._loaded,
        )

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("served", "built", "embedder", "loaded_at_start"),
    [
        (("gpt-4o", "claude-x"), "cl100k_base,o200k_base", "wordllama", "True"),
        ((), "-", "minilm", "False"),
    ],
)
def test_served_models_tokenizers_and_a_slow_embedder_are_loaded_at_start(
    tmp_path: Path, served: tuple[str, ...], built: str, embedder: str, loaded_at_start: str
) -> None:
    config = ""
    if served:
        entries = [
            {"model_name": name, "litellm_params": {"model": f"openai/{name}", "api_key": "k"}}
            for name in served
        ]
        (tmp_path / "models.json").write_text(json.dumps({"model_list": entries}))
        config = str(tmp_path / "models.json")
    probe = _PROBE.format(db=tmp_path / "warm.db", config=config, embedder=embedder)
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    encodings, model, at_start, after_use = result.stdout.split()
    assert encodings == built
    assert model == {"wordllama": "WordLlamaEmbedder", "minilm": "MiniLMEmbedder"}[embedder]
    assert (at_start, after_use) == (loaded_at_start, "True")
