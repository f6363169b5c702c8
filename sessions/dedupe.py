"""Dedupe: a heartbeat reply identical to the last one delivered on its route, within the
heartbeat's window, is held back (its delivery ``suppressed``, its run ``silent``, the detail
``DUPLICATE_DETAIL``).

Identical means the same text once whitespace is normalised (runs of spaces, tabs and line
breaks are one space; leading and trailing space goes). The heartbeat keeps a SHA-256 digest of
the route and that text, and when it was delivered — never the text. Pure: ``now`` is passed.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from hbgw.sessions.heartbeat import HeartbeatState

DUPLICATE_DETAIL = "duplicate: the same reply was delivered on this route within the window"


def normalise(text: str) -> str:
    return " ".join(text.split())


def reply_hash(platform: str, chat: str, thread: str | None, text: str) -> str:
    """The digest dedupe compares: a different route (platform, chat, thread) never matches."""
    route = "\x1f".join((platform, chat, thread or ""))
    return hashlib.sha256(f"{route}\x1e{normalise(text)}".encode()).hexdigest()


def is_duplicate(state: HeartbeatState, digest: str, now: datetime) -> bool:
    """Whether a reply with ``digest`` repeats the last one delivered within the window
    (``[delivered, delivered + window)``: exactly at its end the window has passed)."""
    window = state.policy.dedupe
    if window <= 0 or state.last_reply_at is None or state.last_reply_hash != digest:
        return False
    return now < state.last_reply_at + timedelta(seconds=window)
