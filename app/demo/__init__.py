"""``contextgate serve --demo``: a built-in offline model behind an OpenAI-compatible endpoint."""
