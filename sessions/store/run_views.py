"""What the fire ledger hands out: the run view and the outcomes of a reservation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Any, NamedTuple

from sqlalchemy import Row

from hbgw.core.clock import iso
from hbgw.core.usage import TokenUsage, usage_of
from hbgw.sessions.models import RunRow
from hbgw.sessions.states import RunState, fire_day
from hbgw.sessions.store.deliveries import DeliveryView


class RunKey(NamedTuple):
    """What finds a run: its id and its fire day (the fire id's, ``states.fire_day``). Every
    step on a run by id takes both, so PostgreSQL reads the one day partition holding it
    (``fire_day`` is the ledger's partition key there) instead of every day's index."""

    id: int
    fire_day: date


@dataclass(frozen=True)
class RunView:
    id: int
    fire_id: str
    heartbeat_id: int | None
    session_id: str
    generation: int
    fence: int
    state: RunState
    due_at: datetime | None
    reserved_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    worker: str | None
    deferred: bool
    missed: int
    detail: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None
    # Its delivery record: read with the CLI's and the API's lists, None on the fire path.
    delivery: DeliveryView | None = None
    # The cron job this run belongs to (None: a heartbeat run).
    job_id: str | None = None

    @property
    def key(self) -> RunKey:
        """What the steps on this run take (``RunKey``)."""
        return RunKey(self.id, fire_day(self.fire_id))

    @property
    def usage(self) -> TokenUsage | None:
        """What the fire's turn spent, when its agent counted tokens."""
        return usage_of(self.prompt_tokens, self.completion_tokens, self.model)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fire_id": self.fire_id,
            "session_id": self.session_id,
            "job_id": self.job_id,
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
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "model": self.model,
            "delivery": self.delivery.to_json() if self.delivery else None,
        }


class RefusalReason(StrEnum):
    """Why ``begin_fire`` (or a cron job's ``begin_job_fire``) made no reservation (a stale
    fence raises ``StaleFence`` instead)."""

    NO_HEARTBEAT = "no_heartbeat"
    NO_JOB = "no_job"  # a cron job's: the job's row is gone
    INACTIVE = "inactive"  # the heartbeat is paused or the session is not active
    NOT_DUE = "not_due"


@dataclass(frozen=True)
class Reserved:
    run: RunView


@dataclass(frozen=True)
class Duplicate:
    """The fire id is already in the ledger: a second delivery of the same fire."""

    run: RunView


@dataclass(frozen=True)
class Refused:
    reason: RefusalReason
    next_due_at: datetime | None = None


ReserveOutcome = Reserved | Duplicate | Refused


@dataclass(frozen=True)
class ReplyStart:
    """A user turn may send its reply (``begin_reply``); ``possible_repeat``: an older grant
    was about to send one too and recorded no outcome, so it may have."""

    possible_repeat: bool
    earlier: int | None = None
    """The mark this grant replaced (an older grant's fence), put back by ``drop_reply_mark``."""
    unknown: int = 0
    """Deliveries of an older attempt found still pending: cut off, their outcome unknown."""
    snapped: bool = False
    """The user spoke, so a heartbeat backing off snapped back; ``next_due`` is for the index."""
    next_due: datetime | None = None


def run_view(row: RunRow | Row[Any]) -> RunView:
    """The view of an ORM row or of a Core row (``ledger_sql``: the same column names)."""
    return RunView(
        id=row.id,
        fire_id=row.fire_id,
        heartbeat_id=row.heartbeat_id,
        session_id=row.session_id,
        generation=row.generation,
        fence=row.fence,
        state=row.state,
        due_at=row.due_at,
        reserved_at=row.reserved_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        worker=row.worker,
        deferred=row.deferred,
        missed=row.missed,
        detail=row.detail,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        model=row.model,
        job_id=row.job_id,
    )
