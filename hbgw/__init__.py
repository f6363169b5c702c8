"""Heartbeat Gateway: recurring /heartbeat instructions for chat-agent gateways."""

__version__ = "0.1.0"
