"""What `hbgw heartbeat status` asks Redis of a session, as plain commands and the reading of their
answers: ``TurnGate.is_idle`` and the CLI send them through redis-py, the short path through
its quick client (``resp_quick``), so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hbgw.state.keys import Keys

Command = tuple[str, ...]


def idle_reads(keys: Keys, session_id: str) -> list[Command]:
    """The lock, the inbox and the in-flight list: idle is no key (``keys`` module doc)."""
    return [
        ("EXISTS", keys.lock(session_id)),
        ("LLEN", keys.inbox(session_id)),
        ("LLEN", keys.inflight(session_id)),
    ]


def idle_from(answers: Sequence[Any]) -> bool:
    """No turn holds the lock and no message is queued or in flight."""
    return not any(int(n) for n in answers)


def estop_reads(keys: Keys, session_id: str) -> list[Command]:
    """The global emergency stop, then the session's (two keys: different cluster slots)."""
    return [("EXISTS", keys.estop()), ("EXISTS", keys.estop(session_id))]


def lift_from(answers: Sequence[Any], session_id: str) -> str | None:
    """The command that lifts the emergency stop holding the session; None when none does."""
    global_stop, session_stop = (int(n) for n in answers)
    if global_stop:
        return "hbgw estop off"
    if session_stop:
        return f"hbgw estop off --session {session_id}"
    return None
