"""Message recall: stored messages (and cleared tool results) the prompt no longer carries,
brought back by similarity to the newest user message."""
