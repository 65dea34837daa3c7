"""Long-term memory per user: facts and memories stored, extracted, retrieved and injected."""
