"""Heartbeat Gateway: recurring /heartbeat instructions for chat-agent gateways.

The top layer: the `hbgw` command, `up`, `demo`, and the wiring that assembles processes.
The version is the installed package's (`hbgw --version`).
"""
