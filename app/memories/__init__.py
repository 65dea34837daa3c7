"""Memory: compaction of long conversations and long-term memory per user."""
