"""Offline defaults for tiktoken and litellm (no network at many users' sites)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["bundled_tiktoken_dir", "configure_offline"]


def bundled_tiktoken_dir() -> Path | None:
    """The directory of tiktoken encodings that litellm ships, found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    return path if path.is_dir() else None


def configure_offline() -> None:
    """Set offline defaults; explicit environment values always win."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # litellm otherwise fetches its Anthropic beta-headers map from the internet, synchronously
    # with a 5 s timeout, on the first Claude request carrying an `anthropic-beta` header:
    # behind a firewall that froze the whole server for 5 s.
    os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        bundled = bundled_tiktoken_dir()
        if bundled is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
