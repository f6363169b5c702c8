"""The names of every state the SQL truth records, and the fire id.

String enums: the values are what the database stores and what the CLI and API print, so a
``StrEnum`` member compares equal to its stored text.
"""

from __future__ import annotations

from enum import StrEnum


class SessionStatus(StrEnum):
    ACTIVE = "active"
    SUSPENDED = "suspended"
    CLOSED = "closed"


class ClosedReason(StrEnum):
    """Why a session was closed (``SessionStatus.CLOSED``)."""

    COMPRESSED = "compressed"  # continued by a child session, which carries the heartbeat
    SWITCHED = "switched"  # the chat moved to a new conversation


class HeartbeatStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    CLEARED = "cleared"


class MessageState(StrEnum):
    QUEUED = "queued"  # accepted, waiting for a turn
    DONE = "done"


class RunState(StrEnum):
    """A ledger row: reserved → started → completed | failed | silent; or refunded | abandoned."""

    RESERVED = "reserved"
    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    SILENT = "silent"
    REFUNDED = "refunded"  # never started; count and anchor given back
    ABANDONED = "abandoned"  # never started; a newer configuration won, nothing given back


# Runs that reached the agent: they count, whatever happened afterwards (rule 9).
REACHED_AGENT = frozenset({RunState.STARTED, RunState.COMPLETED, RunState.FAILED, RunState.SILENT})
FINISHED = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.SILENT})
GIVEN_BACK = frozenset({RunState.REFUNDED, RunState.ABANDONED})


class RefundReason(StrEnum):
    """Why a reserved fire ended before the agent started (stored as the run's detail)."""

    LOCK_LOST = "lock lost"
    EMERGENCY_STOP = "emergency stop"
    SESSION_COMPRESSED = "session compressed"
    SESSION_SWITCHED = "session switched"
    SESSION_SUSPENDED = "session suspended"
    SESSION_CLOSED = "session closed"
    SESSION_RESET = "session reset"
    HEARTBEAT_CHANGED = "heartbeat changed"
    OWNER_CHANGED = "owner changed"
    ORPHANED = "worker lost before the agent started"


def fire_id(session_id: str, due_ms: int) -> str:
    """Deterministic id of one fire: a second delivery of the same fire is a no-op."""
    return f"{session_id}:{due_ms}"


def parse_fire_id(value: str) -> tuple[str, int]:
    """``(session_id, due_ms)`` of a fire id; ``ValueError`` if it is not one."""
    session_id, sep, due = value.rpartition(":")
    if not sep or not session_id or not due.isdigit():
        raise ValueError(f"not a fire id: {value!r}")
    return session_id, int(due)
