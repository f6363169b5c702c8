"""What `hbgw heartbeat status` shows, and a heartbeat row read as its state: every read of the
store (``store.heartbeat_records``, ``store.fire_turns``) builds the state from the same columns
with the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Any

from hbgw.core.clock import iso
from hbgw.core.errors import NotFound
from hbgw.sessions import heartbeat as hb
from hbgw.sessions.grammar.costs import BudgetSource
from hbgw.sessions.grammar.cron import CronSchedule
from hbgw.sessions.grammar.hours import ActiveHours
from hbgw.sessions.grammar.intervals import IntervalSchedule
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.states import HeartbeatStatus

# An ORM ``HeartbeatRow`` or a Core row of the heartbeats table: its column names as attributes.
HeartbeatColumns = Any

# What status shows for a session without a live heartbeat; never stored.
NO_HEARTBEAT = "none"


@dataclass(frozen=True)
class HeartbeatStatusView:
    """What `/heartbeat status` and `hbgw heartbeat status --json` show."""

    session_id: str
    state: hb.HeartbeatState | None
    now: datetime
    tokens_today: int = 0
    """Tokens its runs spent on the UTC day of ``now`` (``heartbeat_costs``)."""
    busy: bool | None = None
    """A turn holds the session or messages wait for one (Redis knows; SQL does not): None
    when the caller did not ask, or no Redis answered."""

    @property
    def status(self) -> str:
        """The heartbeat's status, or ``NO_HEARTBEAT`` when there is none or it was cleared."""
        if self.state is None or self.state.status == HeartbeatStatus.CLEARED:
            return NO_HEARTBEAT
        return self.state.status

    @property
    def next_due(self) -> datetime | None:
        return None if self.status == NO_HEARTBEAT or self.state is None else self.state.next_due()

    @property
    def due_now(self) -> bool:
        return self.next_due is not None and self.now >= self.next_due

    @property
    def waiting_for_idle(self) -> bool:
        """Due, and held back by a turn that is actually running (or messages queued for one)."""
        return self.due_now and self.busy is True

    def to_json(self) -> dict[str, Any]:
        live = self.state if self.status != NO_HEARTBEAT else None
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
            "due_now": self.due_now,
            "waiting_for_idle": self.waiting_for_idle,
            "fire_count": live.fire_count if live else 0,
            "generation": self.state.generation if self.state else 0,
            "last_fired_at": iso(live.last_fired) if live else None,
            "last_outcome": live.last_outcome if live else None,
            "paused_reason": live.paused_reason if live else None,
            **policy_json(live),
            "tokens_today": self.tokens_today if live else 0,
            "origin_chat": live.origin_chat if live else None,
            "origin_thread": live.origin_thread if live else None,
        }


def policy_json(state: hb.HeartbeatState | None) -> dict[str, Any]:
    """The policies as status shows them (docs/contract.md "Policies")."""
    policy = state.policy if state else Policy()
    hours = policy.hours
    return {
        "active_hours": f"{hours.start:%H:%M}-{hours.end:%H:%M}" if hours else None,
        "active_hours_tz": hours.timezone if hours else None,
        "weekdays": bool(hours and hours.weekdays),
        "outside_active_hours": bool(state and state.outside_hours()),
        "exact": policy.exact,
        "ends_at": iso(state.ends_at) if state else None,
        "times": policy.times,
        "daily_tokens": policy.budget,
        "budget_source": policy.budget_from,
        "model": policy.model,
        "dedupe_seconds": policy.dedupe,
        "backoff_seconds": policy.backoff,
        "backing_off": bool(state and state.backing_off()),
        "interval_now_seconds": state.interval_seconds() if state else None,
    }


def heartbeat_state(row: HeartbeatColumns) -> hb.HeartbeatState:
    """The state of a heartbeats row, however it was read (``HeartbeatColumns``)."""
    return hb.HeartbeatState(
        prompt=row.prompt,
        schedule=hb.schedule_from_columns(row.interval_seconds, row.cron, row.timezone),
        schedule_text=row.schedule_text,
        status=row.status,
        anchor=row.anchor_at,
        fire_count=row.fire_count,
        generation=row.generation,
        origin_chat=row.origin_chat,
        origin_thread=row.origin_thread,
        last_fired=row.last_fired_at,
        last_outcome=row.last_outcome,
        paused_reason=row.paused_reason,
        policy=_policy(row),
        ends_at=row.ends_at,
        # NULL ``exact``: set without the command layer's policies (or before 0011): no jitter.
        jitter_seed=row.session_id if row.exact is False else "",
        quiet_fires=row.quiet_fires or 0,
        last_reply_hash=row.last_reply_hash,
        last_reply_at=row.last_reply_at,
    )


def _policy(row: HeartbeatColumns) -> Policy:
    hours = ActiveHours.from_text(row.active_hours) if row.active_hours else None
    return Policy(
        hours=hours,
        exact=bool(row.exact),
        times=row.max_fires,
        budget=row.daily_tokens,
        budget_from=budget_source(row),
        model=row.model,
        dedupe=row.dedupe_seconds or 0,
        backoff=row.backoff_seconds,
    )


def budget_source(row: HeartbeatColumns) -> BudgetSource | None:
    """A budget set before 0015 has no source: the heartbeat's own (module doc of 0015)."""
    if row.daily_tokens is None:
        return None
    return BudgetSource(row.budget_source) if row.budget_source else BudgetSource.HEARTBEAT


def utc_day(now: datetime) -> datetime:
    """The start (00:00 UTC) of the UTC day of ``now``: the day whose tokens status shows."""
    return datetime.combine(now.astimezone(UTC).date(), time(0), tzinfo=UTC)


def no_session(session_id: str) -> NotFound:
    """What every read of a missing session raises."""
    return NotFound(
        f"There is no session {session_id!r} — `hbgw session create` makes one and prints its id."
    )
