"""OpenAI's Conversations API (the Responses family): conversations and their items."""
