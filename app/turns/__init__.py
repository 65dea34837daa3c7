"""The shared turn pipeline behind every door: prepare, call upstream, stream, record."""
