"""Agents: what runs a turn."""

from __future__ import annotations

import os

from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings
from hbgw.workers.agents.agent_user import (
    agent_user,
    can_switch_user,
    check_unreadable_by,
    make_undumpable,
)
from hbgw.workers.agents.base import Agent
from hbgw.workers.agents.command import BLANK_COMMAND, CommandAgent
from hbgw.workers.agents.echo import EchoAgent
from hbgw.workers.agents.openai_agent import OpenAIAgent, OpenAIConfig

OPENAI_NEEDS = (
    "HBGW_AGENT=openai needs HBGW_OPENAI_BASE_URL (the endpoint, e.g. https://api.openai.com/v1) "
    "and HBGW_OPENAI_MODEL (the model of every turn); set both."
)


def make_agent(settings: Settings) -> Agent:
    if settings.agent == "echo":
        return EchoAgent(
            delay=settings.echo_delay,
            silent_heartbeats=settings.echo_silent_heartbeats,
            log=settings.agent_log,
        )
    if settings.agent == "command":
        return command_agent(settings)
    if settings.agent == "openai":
        return openai_agent(settings)
    raise BadInput(f"Unknown agent {settings.agent!r}: HBGW_AGENT is echo, command or openai.")


def command_agent(settings: Settings) -> CommandAgent:
    # Spaces only would pass a truthiness test and fail at the first turn instead.
    command = (settings.agent_command or "").strip()
    if not command:
        raise BadInput(f"HBGW_AGENT=command: {BLANK_COMMAND}")
    user = agent_user(
        settings.agent_user,
        same_user=settings.agent_same_user,
        worker_uid=os.geteuid(),
        can_switch=can_switch_user(),
    )
    if user is not None:
        check_unreadable_by(user, {"HBGW_REDIS_TLS_KEY": settings.redis_tls_key})
    # Whoever the child runs as, the worker's /proc entries (its original environment, its
    # memory) are closed to its own uid too: nothing of it is for a command to read.
    make_undumpable()
    return CommandAgent(
        command, timeout=settings.agent_timeout, env_allow=settings.agent_env_names, user=user
    )


def openai_agent(settings: Settings) -> OpenAIAgent:
    base_url = (settings.openai_base_url or "").strip()
    model = (settings.openai_model or "").strip()
    if not base_url or not model:
        raise BadInput(OPENAI_NEEDS)
    key = settings.openai_api_key
    return OpenAIAgent(
        OpenAIConfig(
            base_url=base_url,
            model=model,
            api_key=key.get_secret_value() if key is not None else None,
            heartbeat_model=(settings.openai_heartbeat_model or "").strip() or None,
            timeout=settings.openai_timeout,
            max_retries=settings.openai_max_retries,
            max_steps=settings.agent_max_steps,
            heartbeat_write=settings.agent_heartbeat_write,
            send_tools=settings.openai_tools,
            max_in_flight=settings.openai_max_in_flight,
        )
    )
