"""What beat published, read off the broker: the benchmarks' reader, shared with the tests."""

from bench.broker import take_fires, take_messages

__all__ = ["take_fires", "take_messages"]
