"""The ledger's steps, each inside a caller's transaction: the fire path's methods
(``fire_turns.py``) run several in one transaction, the other methods of ``ledger.py`` one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from hbgw.sessions import heartbeat as hb
from hbgw.sessions.models import HeartbeatRow, RunRow, SessionRow
from hbgw.sessions.states import (
    FINISHED,
    IN_TURN,
    HeartbeatStatus,
    LostLockDetail,
    RefundReason,
    RunState,
    SessionStatus,
)
from hbgw.sessions.store.deliveries import settle_pending_in
from hbgw.sessions.store.heartbeat_records import apply_state, heartbeat_state
from hbgw.sessions.store.job_steps import job_outcome_in, refund_job_run
from hbgw.sessions.store.run_views import (
    RefusalReason,
    Refused,
)


def admit(
    session: SessionRow | Row[Any], row: HeartbeatRow | Row[Any] | None, now: datetime
) -> hb.HeartbeatState | Refused:
    """The heartbeat state a fire may reserve from now, or why it may not."""
    if row is None or row.status == HeartbeatStatus.CLEARED:
        return Refused(RefusalReason.NO_HEARTBEAT)
    state = heartbeat_state(row)
    if state.status != HeartbeatStatus.ACTIVE or session.status != SessionStatus.ACTIVE:
        return Refused(RefusalReason.INACTIVE)
    if not state.is_due(now):
        return Refused(RefusalReason.NOT_DUE, state.next_due())
    return state


def settle_older_turns_in(db: Session, session_id: str, fence: int, now: datetime) -> int:
    """A newer fence proves older turns lost their lock. A reservation they left behind never
    reached the agent and is given back before the new one is made; a run still in its turn was
    cut off (paused or dead worker): a stale turn can no longer write, so the new grant records
    how it ended, and when. One read finds both; refunds go first. The number of deliveries
    found cut off (``settle_lost_run``)."""
    older = list(
        db.scalars(
            select(RunRow)
            .where(
                RunRow.session_id == session_id,
                RunRow.state.in_([RunState.RESERVED, *IN_TURN]),
                RunRow.fence < fence,
            )
            .order_by(RunRow.id)
        )
    )
    cut_off = [run for run in older if run.state in IN_TURN]
    for orphan in older:
        if orphan.state == RunState.RESERVED:
            refund_run(db, orphan, RefundReason.ORPHANED, now)
    unknown = sum(settle_lost_run(db, run, now) for run in cut_off)
    db.flush()
    return unknown


def settle_lost_run(
    db: Session, run: RunRow, now: datetime, *, nothing_sent: bool = False, cut_off: bool = False
) -> int:
    """End a run its turn will never finish ``failed``; ``nothing_sent``: its own turn stopped
    before sending; ``cut_off``: settled by beat after a bound, not by a newer grant or the turn.
    A run cut off while ``delivering`` leaves its delivery ``unknown`` (it may have left), one
    whose turn stopped before the send ``failed``: the number left ``unknown``."""
    unknown = 0
    if run.state == RunState.DELIVERING:
        sent_maybe = not nothing_sent
        settled = settle_pending_in(db, run_id=run.id, now=now, sent_maybe=sent_maybe)
        unknown = settled if sent_maybe else 0
    delivering = run.state == RunState.DELIVERING and not nothing_sent
    run.state = RunState.FAILED
    run.finished_at = now
    if cut_off:
        detail = (
            LostLockDetail.CUT_OFF_DURING_DELIVERY
            if delivering
            else LostLockDetail.CUT_OFF_BEFORE_DELIVERY
        )
    else:
        detail = LostLockDetail.DURING_DELIVERY if delivering else LostLockDetail.BEFORE_DELIVERY
    run.detail = detail.value
    if run.job_id is not None:
        job_outcome_in(db, run, RunState.FAILED, now)
        return unknown
    row = db.get(HeartbeatRow, run.heartbeat_id)
    if row is not None and row.generation == run.generation:
        row.last_outcome = RunState.FAILED.value
        row.updated_at = now
    return unknown


def refund_run(db: Session, run: RunRow, reason: RefundReason, now: datetime) -> None:
    if run.job_id is not None:
        refund_job_run(db, run, reason, now)
        return
    # Locked: a refund checks the generation and anchor, then rewrites the row; a concurrent
    # pause or clear (which locks it too) must come wholly before or after.
    row = db.get(HeartbeatRow, run.heartbeat_id, with_for_update=True)
    unchanged = (
        row is not None and row.generation == run.generation and row.anchor_at == run.reserved_at
    )
    if row is not None and unchanged:
        state = hb.refund(
            heartbeat_state(row),
            prev_anchor=run.prev_anchor_at,
            prev_last_fired=run.prev_last_fired_at,
        )
        apply_state(row, state, now)
        row.last_outcome = f"refunded: {reason}"[:255]
        run.state = RunState.REFUNDED
    else:
        run.state = RunState.ABANDONED
    run.finished_at = now
    run.detail = reason.value


def finished_outcome(outcome: RunState | str) -> RunState:
    for state in FINISHED:
        if state == outcome:
            return state
    known = ", ".join(sorted(FINISHED))
    raise ValueError(f"outcome must be one of {known}, not {outcome!r}")
