"""Agents: what runs a turn."""

from __future__ import annotations

from core.errors import BadInput
from core.settings import Settings
from workers.agents.base import Agent
from workers.agents.command import BLANK_COMMAND, CommandAgent
from workers.agents.echo import EchoAgent


def make_agent(settings: Settings) -> Agent:
    if settings.agent == "echo":
        return EchoAgent(
            delay=settings.echo_delay,
            silent_heartbeats=settings.echo_silent_heartbeats,
            log=settings.agent_log,
        )
    if settings.agent == "command":
        # Spaces only would pass a truthiness test and fail at the first turn instead.
        command = (settings.agent_command or "").strip()
        if not command:
            raise BadInput(f"HBGW_AGENT=command: {BLANK_COMMAND}")
        return CommandAgent(command, timeout=settings.agent_timeout)
    raise BadInput(f"Unknown agent {settings.agent!r}: HBGW_AGENT is echo or command.")
