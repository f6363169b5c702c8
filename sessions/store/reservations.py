"""The one shape of a reservation: the ledger row a fire is reserved with, for a heartbeat's
fire and a cron job's alike (``fire_turns.begin_fire``, ``job_steps``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from hbgw.core.clock import from_ms
from hbgw.sessions.models import RunRow
from hbgw.sessions.states import RunState, fire_day


class Schedule(Protocol):
    """What a reservation keeps of the schedule it reserved from, to give it back by."""

    @property
    def generation(self) -> int: ...
    @property
    def anchor(self) -> datetime | None: ...
    @property
    def last_fired(self) -> datetime | None: ...
    def missed(self, now: datetime) -> int: ...


def reserved_run(
    fire_id: str,
    session_id: str,
    state: Schedule,
    *,
    fence: int,
    due_ms: int,
    now: datetime,
    worker: str | None,
    deferred: bool,
    heartbeat_id: int | None = None,
    job_id: str | None = None,
) -> RunRow:
    """A new ``reserved`` run of ``state``'s schedule (a heartbeat's or a job's)."""
    return RunRow(
        **reserved_values(
            fire_id,
            session_id,
            state,
            fence=fence,
            due_ms=due_ms,
            now=now,
            worker=worker,
            deferred=deferred,
            heartbeat_id=heartbeat_id,
            job_id=job_id,
        )
    )


def reserved_values(
    fire_id: str,
    session_id: str,
    state: Schedule,
    *,
    fence: int,
    due_ms: int,
    now: datetime,
    worker: str | None,
    deferred: bool,
    heartbeat_id: int | None = None,
    job_id: str | None = None,
) -> dict[str, Any]:
    """A new ``reserved`` run's columns (an ORM row's, or ``ledger_sql.INSERT_RUN``'s)."""
    return dict(
        fire_id=fire_id,
        fire_day=fire_day(fire_id),
        heartbeat_id=heartbeat_id,
        job_id=job_id,
        session_id=session_id,
        generation=state.generation,
        fence=fence,
        state=RunState.RESERVED,
        due_at=from_ms(due_ms),
        reserved_at=now,
        prev_anchor_at=state.anchor,
        prev_last_fired_at=state.last_fired,
        worker=worker,
        deferred=deferred,
        missed=state.missed(now),
    )


def run_by_fire_id(db: Session, fire_id: str) -> RunRow | None:
    """The run of ``fire_id`` (the ORM's ``ledger_sql.RUN_BY_FIRE_ID``): its day named too, so
    PostgreSQL reads the one partition that can hold it."""
    query = select(RunRow).where(RunRow.fire_id == fire_id, RunRow.fire_day == fire_day(fire_id))
    return db.scalars(query).first()
