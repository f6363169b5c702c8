"""The model agent's steps and tools (``HBGW_AGENT_MAX_STEPS``, ``HBGW_AGENT_HEARTBEAT_WRITE``,
``HBGW_OPENAI_TOOLS``) and how many model requests a process has out at once
(``HBGW_OPENAI_MAX_IN_FLIGHT``), a part of ``Settings`` kept in a module of its own like the
jobs'."""

from __future__ import annotations

from pydantic import BaseModel, Field


class AgentToolSettings(BaseModel):
    agent_max_steps: int = Field(
        default=8, ge=1, le=100, description="Most model calls (tool steps) in one turn."
    )
    agent_heartbeat_write: bool = Field(
        default=False,
        description="Give the model set_heartbeat and clear_heartbeat (a prompt-injection risk).",
    )
    openai_tools: bool = Field(
        default=True,
        description="Send the heartbeat tools with every model call; false: no tools at all, "
        "for a local model that cannot call tools (the same for user and heartbeat turns).",
    )
    openai_max_in_flight: int = Field(
        default=256,
        ge=1,
        le=4096,
        description="Model requests one worker process has out at once, all on one event loop; "
        "more wait there for a free slot. Keep it at HBGW_WORKER_TURNS or more, or turns wait "
        "for each other while holding their locks.",
    )
