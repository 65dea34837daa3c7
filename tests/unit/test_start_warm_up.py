"""At start, the tokenizers of the served and helper models and the embedded embedder are
loaded on worker threads (the first request would otherwise wait ~0.4 s for tiktoken's
o200k_base, and for the model), while the server is already ready."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_PROBE = """
import asyncio, os, sys
os.environ["CONTEXTGATE_DATABASE_URL"] = "sqlite+aiosqlite:///{db}"
os.environ["CONTEXTGATE_UPSTREAM_BASE_URL"] = "http://127.0.0.1:9/v1"
from app.context import tokens
from app.main import create_app

async def main():
    app = create_app()
    assert tokens._encoding_for.cache_info().currsize == 0
    async with app.router.lifespan_context(app):
        state = app.state.contextgate
        await asyncio.gather(*list(state.background))
        print(tokens._encoding_for.cache_info().currsize, state.embedder._loaded)

asyncio.run(main())
"""


def test_tokenizers_and_embedder_are_loaded_at_start(tmp_path: Path) -> None:
    probe = _PROBE.format(db=tmp_path / "warm.db")
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    encodings, embedder_loaded = result.stdout.split()
    assert int(encodings) >= 1  # gpt-4o-mini (planner and summarizer): o200k_base
    assert embedder_loaded == "True"
