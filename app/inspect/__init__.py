"""Read-only views for operators: what contextgate stored and decided (CLI and /ui)."""
