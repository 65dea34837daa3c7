"""The inspector: server-rendered pages at /ui showing what contextgate stored and decided."""
