"""What a heartbeat turn looks like to the agent, and how its silence is recognised."""

from __future__ import annotations

import re

SILENCE_MARKERS = ("[SILENT]", "NO_REPLY")
MAX_MARKER_REPLY = 64
EMPTY_REPLY_NOTICE = "The agent returned no reply — please try sending your message again."
# The start of a failed user turn's notice: `hbgw send` exits non-zero on it (stored as a notice).
FAILED_TURN_NOTICE = "⚠ The turn failed: "

ANSWER_BRIEFLY = (
    "If nothing meaningful changed since the last check, answer briefly or reply with exactly "
    "[SILENT]; do not invent work."
)

_SPACE = re.compile(r"\s+")


def heartbeat_message(prompt: str, schedule: str) -> str:
    """An ordinary user message: header, the instruction, one anti-busywork sentence."""
    return f"[Heartbeat — recurring instruction, fires {schedule}]\n{prompt}\n\n{ANSWER_BRIEFLY}"


def is_silent(reply: str) -> bool:
    """True when the whole reply is a silence marker (case- and space-insensitive) or blank.

    A blank reply says nothing, so a heartbeat turn has nothing to send (rule 7).
    """
    if len(reply) > MAX_MARKER_REPLY:
        return False
    squeezed = _SPACE.sub("", reply).upper()
    return not squeezed or squeezed in {_SPACE.sub("", m).upper() for m in SILENCE_MARKERS}
