"""Heartbeat configuration: set, pause, resume, clear, status, and what restore and audit read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from hbgw.sessions import heartbeat as hb
from hbgw.sessions.grammar import Schedule
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.heartbeat_view import (
    NO_HEARTBEAT,
    HeartbeatStatusView,
    budget_source,
    heartbeat_state,
    policy_json,
)
from hbgw.sessions.models import PAUSED_REASON_CHARS, HeartbeatRow, SessionRow
from hbgw.sessions.states import HeartbeatStatus, SessionStatus
from hbgw.sessions.store.base import (
    Transactions,
    active_session_row,
    heartbeat_row,
    session_row,
    transaction,
)
from hbgw.sessions.store.heartbeat_costs import tokens_on_day_in
from hbgw.sessions.store.owner_budgets import with_owner_budget
from hbgw.sessions.store.owner_quotas import check_heartbeat_room
from hbgw.sessions.validation import check_schedule_text, check_storable

# Where they were defined until the status command's quick read needed them without SQLAlchemy.
__all__ = [
    "NO_HEARTBEAT",
    "HeartbeatRecords",
    "HeartbeatStatusView",
    "apply_state",
    "budget_source",
    "clear_departing",
    "heartbeat_state",
    "policy_json",
    "state_values",
    "user_spoke_in",
]


def apply_state(row: HeartbeatRow, state: hb.HeartbeatState, now: datetime) -> None:
    for column, value in state_values(state, now).items():
        setattr(row, column, value)


def state_values(state: hb.HeartbeatState, now: datetime) -> dict[str, Any]:
    """A heartbeat row's columns for ``state`` (an ORM row's, or ``UPDATE_HEARTBEAT``'s)."""
    interval_seconds, cron, timezone = hb.schedule_columns(state.schedule)
    policy = state.policy
    return {
        "prompt": state.prompt,
        "interval_seconds": interval_seconds,
        "cron": cron,
        "timezone": timezone,
        "schedule_text": state.schedule_text,
        "status": state.status,
        "anchor_at": state.anchor,
        "next_due_at": state.next_due(),
        "fire_count": state.fire_count,
        "generation": state.generation,
        "origin_chat": state.origin_chat,
        "origin_thread": state.origin_thread,
        "last_fired_at": state.last_fired,
        "paused_reason": state.paused_reason[:PAUSED_REASON_CHARS] if state.paused_reason else None,
        "active_hours": policy.hours.describe() if policy.hours else None,
        "exact": True if policy.exact else (False if state.jitter_seed else None),
        "ends_at": state.ends_at,
        "max_fires": policy.times,
        "daily_tokens": policy.budget,
        "budget_source": policy.budget_from,
        "model": policy.model,
        "dedupe_seconds": policy.dedupe or None,
        "backoff_seconds": policy.backoff,
        "quiet_fires": state.quiet_fires or None,
        "last_reply_hash": state.last_reply_hash,
        "last_reply_at": state.last_reply_at,
        "updated_at": now,
    }


@dataclass(frozen=True)
class SnappedBack:
    """A backed-off heartbeat is back at its interval; ``next_due`` is for the index."""

    next_due: datetime | None


def user_spoke_in(db: Session, session: SessionRow, now: datetime) -> SnappedBack | None:
    """The user spoke in ``session`` (locked by the caller's fenced step): a backed-off active
    heartbeat snaps back (``hb.user_spoke``), with the due time the index should hold then;
    None when nothing changed (one read)."""
    row = heartbeat_row(db, session.id, for_update=True)
    if row is None or row.status != HeartbeatStatus.ACTIVE or not row.quiet_fires:
        return None
    state = hb.user_spoke(heartbeat_state(row), now)
    if state is None:
        return None
    apply_state(row, state, now)
    return SnappedBack(state.next_due() if session.status == SessionStatus.ACTIVE else None)


def clear_departing(db: Session, session_id: str, now: datetime) -> None:
    """A conversation that goes away (reset, switch, suspend) keeps no heartbeat."""
    row = heartbeat_row(db, session_id)
    if row is not None and row.status != HeartbeatStatus.CLEARED:
        apply_state(row, hb.clear(heartbeat_state(row), now), now)


class HeartbeatRecords(Transactions):
    @transaction
    def get_heartbeat(self, session_id: str) -> hb.HeartbeatState | None:
        with self._transaction() as db:
            session_row(db, session_id)
            row = heartbeat_row(db, session_id)
            return heartbeat_state(row) if row else None

    @transaction
    def heartbeat_status(self, session_id: str, now: datetime) -> HeartbeatStatusView:
        with self._transaction() as db:
            session_row(db, session_id)
            row = heartbeat_row(db, session_id)
            if row is None:
                return HeartbeatStatusView(session_id, None, now)
            spent = tokens_on_day_in(db, row.id, now)
            return HeartbeatStatusView(session_id, heartbeat_state(row), now, spent)

    @transaction
    def set_heartbeat(
        self,
        session_id: str,
        *,
        schedule: Schedule,
        schedule_text: str,
        prompt: str,
        now: datetime,
        origin_chat: str | None = None,
        origin_thread: str | None = None,
        policy: Policy | None = None,
    ) -> hb.HeartbeatState:
        """Set or replace the session's heartbeat; replies go where it was set. ``policy``:
        the command's (jittered unless ``exact``); None: no policy at all, exact times."""
        check_storable(prompt, "prompt")
        check_schedule_text(schedule_text, hb.schedule_columns(schedule)[1])
        with self._transaction() as db:
            session = active_session_row(db, session_id, "set a heartbeat in")
            row = heartbeat_row(db, session_id)
            if row is None or row.status == HeartbeatStatus.CLEARED:  # one more live heartbeat
                check_heartbeat_room(db, self.quotas, session.owner, session_id)
            if policy is not None and not policy.names_budget:
                policy = with_owner_budget(db, session.owner, policy)
            state = hb.set_heartbeat(
                heartbeat_state(row) if row else None,
                schedule=schedule,
                schedule_text=schedule_text,
                prompt=prompt,
                origin_chat=origin_chat if origin_chat is not None else session.chat,
                origin_thread=origin_thread if origin_chat is not None else session.thread,
                now=now,
                policy=policy or Policy(),
                jitter_seed=session_id if policy is not None and policy.stagger else "",
            )
            if row is None:
                row = HeartbeatRow(session_id=session_id, created_at=now)
                db.add(row)
            apply_state(row, state, now)
            row.set_at = now
            row.last_outcome = None
            return state

    @transaction
    def pause_heartbeat(self, session_id: str, now: datetime) -> hb.HeartbeatState:
        return self._change(session_id, now, hb.pause)

    @transaction
    def resume_heartbeat(self, session_id: str, now: datetime) -> hb.HeartbeatState:
        return self._change(session_id, now, hb.resume)

    @transaction
    def clear_heartbeat(self, session_id: str, now: datetime) -> hb.HeartbeatState:
        return self._change(session_id, now, hb.clear)

    @transaction
    def pause_for_route(
        self, session_id: str, chat: str | None, reason: str, now: datetime
    ) -> hb.HeartbeatState | None:
        """Pause the session's active heartbeat with ``reason`` when its route (its origin
        ``chat``; None: any) refused a delivery for good; None when there was nothing to pause.
        Locked like ``_change``: a reservation under way comes wholly before or after."""
        with self._transaction() as db:
            session_row(db, session_id, for_update=True)
            row = heartbeat_row(db, session_id, for_update=True)
            if row is None or row.status != HeartbeatStatus.ACTIVE:
                return None
            if chat is not None and row.origin_chat != chat:
                return None  # another route failed: the heartbeat's own may be fine
            state = hb.pause_for_route(heartbeat_state(row), reason)
            apply_state(row, state, now)
            return state

    def _change(
        self,
        session_id: str,
        now: datetime,
        transition: hb.Transition,
    ) -> hb.HeartbeatState:
        with self._transaction() as db:
            # Locked like every writer of the heartbeat row (a reservation locks the session
            # first, a refund the row): a pause read before a concurrent reservation committed
            # would otherwise be written over by it, or write over it (PostgreSQL).
            session_row(db, session_id, for_update=True)
            row = heartbeat_row(db, session_id, for_update=True)
            state = transition(heartbeat_state(row) if row else None, now)
            assert row is not None  # the transition raised InvalidState otherwise
            apply_state(row, state, now)
            return state
