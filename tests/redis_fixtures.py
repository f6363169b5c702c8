"""Redis fixtures (filled in by the Redis layer)."""
