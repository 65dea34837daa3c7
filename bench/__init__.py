"""Benchmarks. Importing ``app`` first gives them the server's process defaults (offline
tokenizers and cost map, one BLAS thread) before any of them imports numpy."""

import app  # noqa: F401
