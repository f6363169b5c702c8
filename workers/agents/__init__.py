"""Agents: what runs a turn."""

from __future__ import annotations

from core.errors import BadInput
from core.settings import Settings
from workers.agents.base import Agent
from workers.agents.command import CommandAgent
from workers.agents.echo import EchoAgent


def make_agent(settings: Settings) -> Agent:
    if settings.agent == "echo":
        return EchoAgent(
            delay=settings.echo_delay,
            silent_heartbeats=settings.echo_silent_heartbeats,
            log=settings.agent_log,
        )
    if settings.agent == "command":
        if not settings.agent_command:
            raise BadInput("HBGW_AGENT=command needs HBGW_AGENT_COMMAND, the command to run.")
        return CommandAgent(settings.agent_command, timeout=settings.agent_timeout)
    raise BadInput(f"Unknown agent {settings.agent!r}: HBGW_AGENT is echo or command.")
