"""Compaction: the oldest turns of a long conversation summarized into a bounded bundle, and
periodic summaries every N message pairs."""
