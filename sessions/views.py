"""Plain values the store hands out; nothing outside ``sessions/`` sees an ORM object."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.clock import iso
from sessions.grammar import CronSchedule, IntervalSchedule
from sessions.heartbeat import HeartbeatState


@dataclass(frozen=True)
class SessionView:
    id: str
    platform: str
    chat: str
    thread: str | None
    owner: str | None
    status: str
    closed_reason: str | None
    parent_id: str | None
    conversation: int
    fence: int
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.id,
            "platform": self.platform,
            "chat": self.chat,
            "thread": self.thread,
            "owner": self.owner,
            "status": self.status,
            "closed_reason": self.closed_reason,
            "parent_id": self.parent_id,
            "conversation": self.conversation,
            "created_at": iso(self.created_at),
        }


@dataclass(frozen=True)
class HeartbeatStatus:
    """What `/heartbeat status` and `hbgw heartbeat status --json` show."""

    session_id: str
    state: HeartbeatState | None
    now: datetime

    @property
    def status(self) -> str:
        if self.state is None or self.state.status == "cleared":
            return "none"
        return self.state.status

    @property
    def next_due(self) -> datetime | None:
        return None if self.status == "none" or self.state is None else self.state.next_due()

    @property
    def waiting_for_idle(self) -> bool:
        return self.next_due is not None and self.now >= self.next_due

    def to_json(self) -> dict[str, Any]:
        live = self.state if self.status != "none" else None
        schedule = live.schedule if live else None
        return {
            "session_id": self.session_id,
            "status": self.status,
            "prompt": live.prompt if live else None,
            "schedule": live.describe() if live else None,
            "interval_seconds": schedule.seconds
            if isinstance(schedule, IntervalSchedule)
            else None,
            "cron": schedule.expr if isinstance(schedule, CronSchedule) else None,
            "timezone": schedule.timezone if isinstance(schedule, CronSchedule) else None,
            "next_due_at": iso(self.next_due),
            "waiting_for_idle": self.waiting_for_idle,
            "fire_count": live.fire_count if live else 0,
            "generation": self.state.generation if self.state else 0,
            "last_fired_at": iso(live.last_fired) if live else None,
            "last_outcome": live.last_outcome if live else None,
            "origin_chat": live.origin_chat if live else None,
            "origin_thread": live.origin_thread if live else None,
        }


@dataclass(frozen=True)
class RunView:
    id: int
    fire_id: str
    heartbeat_id: int
    session_id: str
    generation: int
    fence: int
    state: str
    due_at: datetime | None
    reserved_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    worker: str | None
    deferred: bool
    missed: int
    detail: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fire_id": self.fire_id,
            "session_id": self.session_id,
            "generation": self.generation,
            "fence": self.fence,
            "state": self.state,
            "due_at": iso(self.due_at),
            "reserved_at": iso(self.reserved_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "worker": self.worker,
            "deferred": self.deferred,
            "missed": self.missed,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class MessageView:
    id: int
    session_id: str
    conversation: int
    role: str
    kind: str
    text: str
    fire_id: str | None
    reply_to: int | None
    state: str
    created_at: datetime


@dataclass(frozen=True)
class RestoreEntry:
    """One active heartbeat of an active session, for the restore pass."""

    session_id: str
    next_due_at: datetime
    fence: int


@dataclass(frozen=True)
class Reserved:
    run: RunView


@dataclass(frozen=True)
class Duplicate:
    """The fire id is already in the ledger: a second delivery of the same fire."""

    run: RunView


@dataclass(frozen=True)
class Refused:
    """No reservation: ``reason`` is stale_fence, no_heartbeat, inactive or not_due."""

    reason: str
    next_due_at: datetime | None = None


ReserveOutcome = Reserved | Duplicate | Refused


@dataclass(frozen=True)
class HeartbeatAudit:
    """What the invariant check needs of one heartbeat row."""

    heartbeat_id: int
    session_id: str
    status: str
    session_status: str
    fire_count: int
    set_at: datetime
