"""The names of every state the SQL truth records, and the fire id.

String enums: the values are what the database stores and what the CLI and API print, so a
``StrEnum`` member compares equal to its stored text.
"""

from __future__ import annotations

from datetime import date, timedelta
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


class JobStatus(StrEnum):
    """A cron job: active → completed (its runs are done) | cancelled; paused ↔ active."""

    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class MissedPolicy(StrEnum):
    """What a job does with due times missed while nothing ran (every worker down)."""

    COALESCE = "coalesce"  # one run for all of them, at once (rule 4, as heartbeats)
    SKIP = "skip"  # none of them; the schedule goes on at its next time after now


class MessageState(StrEnum):
    QUEUED = "queued"  # accepted, waiting for a turn
    DONE = "done"


class RunState(StrEnum):
    """A ledger row: reserved → started [→ delivering] → completed | failed | silent; or
    refunded | abandoned."""

    RESERVED = "reserved"
    STARTED = "started"
    DELIVERING = "delivering"  # fenced, just before the reply leaves for the platform
    COMPLETED = "completed"
    FAILED = "failed"
    SILENT = "silent"
    REFUNDED = "refunded"  # never started; count and anchor given back
    ABANDONED = "abandoned"  # never started; a newer configuration won, nothing given back


# Runs whose turn is still going (or was cut off, until the next grant settles it).
IN_TURN = frozenset({RunState.STARTED, RunState.DELIVERING})
FINISHED = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.SILENT})
# Runs that reached the agent: they count, whatever happened afterwards (rule 9).
REACHED_AGENT = IN_TURN | FINISHED
GIVEN_BACK = frozenset({RunState.REFUNDED, RunState.ABANDONED})
# Runs with a final state: nothing will change them any more.
SETTLED = FINISHED | GIVEN_BACK


class DeliveryState(StrEnum):
    """One outbound message's delivery record: pending (written with the fenced mark just
    before the send) → sent | failed | retrying; suppressed (nothing to say, or the platform
    dropped it as a repeat); unknown (its turn was cut off between the send and the record: it
    may have left); retrying (the platform failed for now: the same text goes again under the
    same key at ``next_attempt_at``, never a new turn). A later attempt at the same delivery key
    makes it pending again."""

    PENDING = "pending"
    RETRYING = "retrying"
    SENT = "sent"
    FAILED = "failed"
    SUPPRESSED = "suppressed"
    UNKNOWN = "unknown"


# How a delivery can end (the label values of ``hbgw_deliveries_total``'s ``outcome``).
DELIVERY_OUTCOMES = (
    DeliveryState.SENT,
    DeliveryState.FAILED,
    DeliveryState.SUPPRESSED,
    DeliveryState.UNKNOWN,
    DeliveryState.RETRYING,
)


class LostLockDetail(StrEnum):
    """Why a run that reached the agent is ``failed``: its turn lost the session lock (the
    detail of the run; written by the turn itself, or by the next grant of the session)."""

    BEFORE_DELIVERY = "lock lost before delivery"  # nothing was sent
    DURING_DELIVERY = "lock lost during delivery"  # the reply may have been sent
    # Settled by beat (``BeatCore.settle_cut_off``): no turn ended the run and no grant of its
    # session came for HBGW_DEAD_AFTER, its lock free all along.
    CUT_OFF_BEFORE_DELIVERY = "cut off before delivery"  # nothing was sent
    CUT_OFF_DURING_DELIVERY = "cut off during delivery"  # the reply may have been sent


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
    JOB_CHANGED = "job changed"  # a cron job's run: the job was paused, resumed or cancelled
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


DAY_MS = 86_400_000
EPOCH_DAY = date(1970, 1, 1)


def fire_day(value: str) -> date:
    """The UTC day of a fire id's due time: the ledger's partition key on PostgreSQL. A
    function of the fire id, so ``UNIQUE (fire_id, fire_day)`` is exactly ``UNIQUE (fire_id)``."""
    return EPOCH_DAY + timedelta(days=parse_fire_id(value)[1] // DAY_MS)


# A job's member in the due index: a session id never starts with it (ids are "s" + hex).
JOB_MEMBER_PREFIX = "job:"


def job_member(job_id: str) -> str:
    """The due-index member (and fire-id prefix) of a cron job."""
    return f"{JOB_MEMBER_PREFIX}{job_id}"


def job_of_member(member: str) -> str | None:
    """The job id of a due-index member, or None when the member is a session."""
    return member[len(JOB_MEMBER_PREFIX) :] if member.startswith(JOB_MEMBER_PREFIX) else None
