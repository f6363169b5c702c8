"""SQL fixtures."""
