"""The ledger's ORM steps for a cron job's run, each inside a caller's transaction: what
``ledger_steps.py`` does to a heartbeat's row when it settles what older turns left (a
reservation given back, a run cut off), done to the job's row. A run that goes as planned takes
the Core steps of ``job_rows.py`` instead."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from hbgw.sessions import jobs
from hbgw.sessions.models import JobRow, RunRow
from hbgw.sessions.states import RefundReason, RunState
from hbgw.sessions.store.job_records import apply_job_state, job_state


def refund_job_run(db: Session, run: RunRow, reason: RefundReason, now: datetime) -> None:
    """Give a reservation back to its job: only when neither its generation nor its anchor
    moved since (else ``abandoned``: the newer configuration wins)."""
    row = db.get(JobRow, run.job_id, with_for_update=True)
    unchanged = (
        row is not None and row.generation == run.generation and row.anchor_at == run.reserved_at
    )
    if row is not None and unchanged:
        state = jobs.refund(
            job_state(row), prev_anchor=run.prev_anchor_at, prev_last_fired=run.prev_last_fired_at
        )
        apply_job_state(row, state, now)
        row.last_outcome = f"refunded: {reason}"[:255]
        run.state = RunState.REFUNDED
    else:
        run.state = RunState.ABANDONED
    run.finished_at = now
    run.detail = reason.value


def job_outcome_in(db: Session, run: RunRow, outcome: RunState, now: datetime) -> JobRow | None:
    """A run of the job ended ``outcome``: its last outcome, and completed when it was the
    last run it had (a one-shot, the last of ``--times``)."""
    row = db.get(JobRow, run.job_id, with_for_update=True)
    if row is None:
        return None
    row.last_outcome = outcome.value
    row.updated_at = now
    if row.generation == run.generation:
        apply_job_state(row, jobs.finished(job_state(row)), now)
    return row
