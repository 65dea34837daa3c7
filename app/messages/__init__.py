"""The Anthropic door: POST /v1/messages and /v1/messages/count_tokens."""
