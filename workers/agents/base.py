"""The agent protocol: one call per turn, a step callback for liveness stamps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from core.errors import AgentError

__all__ = [
    "SYSTEM_PROMPT",
    "TOOLS",
    "Agent",
    "AgentError",
    "StepCallback",
    "TurnKind",
    "TurnRequest",
]

TurnKind = Literal["user", "heartbeat"]

# The system prompt and tool set are the same for every turn of a session: a heartbeat turn
# must not change them, or the provider's prompt cache is lost.
SYSTEM_PROMPT = "You are a helpful agent working in a chat conversation."
TOOLS: tuple[str, ...] = ("web_fetch", "shell")


@dataclass(frozen=True)
class TurnRequest:
    session_id: str
    kind: TurnKind
    text: str
    history: tuple[tuple[str, str], ...] = ()
    system_prompt: str = SYSTEM_PROMPT
    tools: tuple[str, ...] = field(default=TOOLS)


StepCallback = Callable[[str], None]


class Agent(Protocol):
    name: str

    def run(self, request: TurnRequest, on_step: StepCallback) -> str:
        """Return the reply text; raise AgentError when the turn fails."""
        ...
