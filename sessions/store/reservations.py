"""The one shape of a reservation: the ledger row a fire is reserved with, for a heartbeat's
fire and a cron job's alike (``fire_turns.begin_fire``, ``job_steps``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from hbgw.core.clock import from_ms
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
