"""The /heartbeat commands at work: apply a parsed command to the store, answer in one sentence.

The grammar (``sessions.grammar``) only parses; this module is where a command meets the store.
"""

from __future__ import annotations

from datetime import datetime

from hbgw.sessions import replies
from hbgw.sessions.grammar import (
    Clear,
    Command,
    GrammarLimits,
    Pause,
    Resume,
    SetHeartbeat,
    ShowHelp,
    ShowStatus,
    help_text,
    parse_command,
)
from hbgw.sessions.store import Heartbeats, Store


def apply_command(
    heartbeats: Heartbeats,
    session_id: str,
    command: Command,
    now: datetime,
    *,
    origin_chat: str | None = None,
    origin_thread: str | None = None,
    estop: bool = False,
) -> str:
    """``estop``: an emergency stop holds the session (Redis knows; the caller asks it)."""
    if isinstance(command, ShowHelp):
        return help_text()
    if isinstance(command, ShowStatus):
        return replies.status_reply(heartbeats.heartbeat_status(session_id, now), estop=estop)
    if isinstance(command, Pause):
        return replies.pause_reply(heartbeats.pause_heartbeat(session_id, now))
    if isinstance(command, Resume):
        return replies.resume_reply(heartbeats.resume_heartbeat(session_id, now), now)
    if isinstance(command, Clear):
        return replies.clear_reply(heartbeats.clear_heartbeat(session_id, now))
    assert isinstance(command, SetHeartbeat)
    state = heartbeats.set_heartbeat(
        session_id,
        schedule=command.schedule,
        schedule_text=command.schedule_text,
        prompt=command.prompt,
        now=now,
        origin_chat=origin_chat,
        origin_thread=origin_thread,
        policy=command.policy,
    )
    return replies.set_reply(state)


def handle_slash(
    store: Store,
    session_id: str,
    text: str,
    now: datetime,
    limits: GrammarLimits,
    *,
    origin_chat: str | None = None,
    origin_thread: str | None = None,
    estop: bool = False,
) -> str:
    """Parse and apply; grammar and state errors propagate as typed errors with a sentence."""
    store.sessions.get_session(session_id)  # an unknown session is reported before the grammar
    command = parse_command(text, limits)
    return apply_command(
        store.heartbeats,
        session_id,
        command,
        now,
        origin_chat=origin_chat,
        origin_thread=origin_thread,
        estop=estop,
    )
