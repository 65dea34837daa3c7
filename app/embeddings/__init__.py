"""POST /v1/embeddings: passed through the model router, counted like chat."""
