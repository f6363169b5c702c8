"""The agent protocol: one call per turn, a step callback for liveness stamps.

A turn answers an ``AgentReply``: the text and, for agents that count them, the tokens spent.
A failure is an ``AgentError``; ``TurnFailed`` is one that carries what was spent before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from hbgw.core.errors import AgentError
from hbgw.core.usage import TokenUsage

__all__ = [
    "SYSTEM_PROMPT",
    "TOOLS",
    "Agent",
    "AgentError",
    "AgentReply",
    "HeartbeatTools",
    "StepCallback",
    "TokenUsage",
    "TurnFailed",
    "TurnKind",
    "TurnRequest",
]

TurnKind = Literal["user", "heartbeat"]

# The system prompt and tool set are the same for every turn of a session: a heartbeat turn
# must not change them, or the provider's prompt cache is lost.
SYSTEM_PROMPT = (
    "You are a helpful agent working in a chat conversation. A message that starts with "
    "[Heartbeat — recurring instruction …] is this session's recurring check: follow it, and "
    "when nothing meaningful changed answer with exactly [SILENT]."
)
TOOLS: tuple[str, ...] = ("web_fetch", "shell")


class HeartbeatTools(Protocol):
    """The session's own heartbeat, as a turn's tools may see and (when allowed) change it.

    Every method answers the sentence the model reads as the tool's result; a refused or
    malformed request is such a sentence too, never an exception.
    """

    def get(self) -> str: ...

    def set(self, schedule: str, prompt: str) -> str: ...

    def clear(self) -> str: ...


@dataclass(frozen=True)
class TurnRequest:
    session_id: str
    kind: TurnKind
    text: str
    # Earlier (role, text) turns of the conversation, oldest first; ``text`` is not among them.
    history: tuple[tuple[str, str], ...] = ()
    system_prompt: str = SYSTEM_PROMPT
    tools: tuple[str, ...] = field(default=TOOLS)
    heartbeat: HeartbeatTools | None = None
    # The model a cron job names (agents that choose one honour it; others ignore it).
    model: str | None = None


@dataclass(frozen=True)
class AgentReply:
    text: str
    usage: TokenUsage | None = None


class TurnFailed(AgentError):
    """A failed turn that had spent tokens before it failed: they are recorded all the same.
    ``unreachable``: the model endpoint could not be reached or was down (no connection, a
    timeout, 429 or 5xx after the client's own retries) — worth trying again later, unlike a
    refusal of the request itself."""

    def __init__(
        self, message: str, usage: TokenUsage | None = None, *, unreachable: bool = False
    ) -> None:
        super().__init__(message)
        self.usage = usage
        self.unreachable = unreachable


StepCallback = Callable[[str], None]


class Agent(Protocol):
    name: str

    def run(self, request: TurnRequest, on_step: StepCallback) -> AgentReply:
        """Return the reply; raise AgentError when the turn fails."""
        ...
