"""The edges: inbound messages and slash commands, and the channels that deliver to platforms."""
