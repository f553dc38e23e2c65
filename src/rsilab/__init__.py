"""rsilab."""
