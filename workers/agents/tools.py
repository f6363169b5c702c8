"""The tools the OpenAI-compatible agent offers, as Chat Completions schemas, and their dispatch.

The lists are module constants chosen by settings alone (``HBGW_AGENT_HEARTBEAT_WRITE``), never by
the turn's kind: a heartbeat turn sends the very same bytes as a user turn (rule 5), so the
provider's prompt cache survives. A heartbeat turn's write is refused when it runs instead
(``workers/heartbeat_tools.py`` says why).
"""

from __future__ import annotations

import json
from typing import Any, Final

from hbgw.workers.agents.base import HeartbeatTools, TurnFailed

GET_HEARTBEAT: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "get_heartbeat",
        "description": (
            "Show this session's heartbeat (its recurring instruction): prompt, schedule, "
            "next fire time, fires so far and last outcome."
        ),
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}

SET_HEARTBEAT: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "set_heartbeat",
        "description": (
            "Set (or replace) this session's heartbeat. Only when the user asked for it; the "
            "change is announced in the conversation."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "schedule": {
                    "type": "string",
                    "description": "An interval (10m, every 2h) or a cron schedule (@daily).",
                },
                "prompt": {"type": "string", "description": "The recurring instruction."},
            },
            "required": ["schedule", "prompt"],
            "additionalProperties": False,
        },
    },
}

CLEAR_HEARTBEAT: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "clear_heartbeat",
        "description": "Remove this session's heartbeat. Only when the user asked for it.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}

READ_ONLY_TOOLS: Final[tuple[dict[str, Any], ...]] = (GET_HEARTBEAT,)
READ_WRITE_TOOLS: Final[tuple[dict[str, Any], ...]] = (
    GET_HEARTBEAT,
    SET_HEARTBEAT,
    CLEAR_HEARTBEAT,
)

NO_TOOLBOX = "Error: this turn has no access to the session's heartbeat."


def tool_list(heartbeat_write: bool) -> tuple[dict[str, Any], ...]:
    return READ_WRITE_TOOLS if heartbeat_write else READ_ONLY_TOOLS


def run_tool(
    name: str, arguments: str, toolbox: HeartbeatTools | None, offered: tuple[str, ...]
) -> str:
    """The tool's answer for the model; arguments that are not a JSON object fail the turn."""
    if name not in offered:
        return f"Error: there is no tool named {name!r}; use one of {', '.join(offered)}."
    args = _arguments(name, arguments)
    if toolbox is None:
        return NO_TOOLBOX
    if name == "get_heartbeat":
        return toolbox.get()
    if name == "clear_heartbeat":
        return toolbox.clear()
    schedule, prompt = args.get("schedule"), args.get("prompt")
    if not isinstance(schedule, str) or not isinstance(prompt, str):
        return "Error: set_heartbeat needs the strings schedule and prompt."
    return toolbox.set(schedule, prompt)


def _arguments(name: str, arguments: str) -> dict[str, Any]:
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise TurnFailed(f"The model called {name} with arguments that are not JSON.") from exc
    if not isinstance(args, dict):
        raise TurnFailed(f"The model called {name} with arguments that are not a JSON object.")
    return args
