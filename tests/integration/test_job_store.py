"""The cron-job store on SQLite and PostgreSQL: the ledger's UNIQUE fire id, a job's run begun
in one transaction (reserved, re-checked and started, or given back at once) and its repeat,
completion, cancel twice, and an older worker's reservation given back by beat."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session as OrmSession

from hbgw.core.clock import to_ms, utcnow
from hbgw.core.errors import InvalidState, StaleFence
from hbgw.sessions import jobs
from hbgw.sessions.grammar.job_schedule import parse_job_schedule
from hbgw.sessions.models import JobRow, RunRow
from hbgw.sessions.states import JobStatus, RefundReason, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.store.job_records import apply_job_state, job_state
from hbgw.sessions.store.reservations import reserved_values
from hbgw.sessions.store.run_views import run_view
from hbgw.sessions.views import (
    Duplicate,
    JobBegin,
    JobNotStarted,
    JobRoute,
    JobStart,
    JobStarted,
    NewJob,
    RefusalReason,
    Refused,
    RunView,
)


def _job(store: Store, schedule: str, age: float) -> tuple[str, str]:
    set_at = utcnow() - timedelta(seconds=age)
    sid = store.sessions.create_session(platform="slack", chat="C1", now=set_at).id
    parsed = parse_job_schedule(schedule, now=set_at, min_interval=60)
    text = f"{schedule} exact"  # on its exact times: the fire ids below name them
    job = store.jobs.create_job(NewJob(parsed, text, "p", JobRoute(session_id=sid)), set_at)
    return job.id, sid


def _begin(
    store: Store,
    sid: str,
    fence: int,
    jid: str,
    now: datetime,
    *,
    refusal: RefundReason | None = None,
) -> tuple[str, JobBegin]:
    """A grant ``fence`` begins the job's due run, as a worker does: one transaction."""
    due = store.jobs.job(jid).next_due
    assert due is not None
    fid = f"job:{jid}:{to_ms(due)}"
    start = JobStart(1, lambda job: job.state.prompt, 5, refusal=refusal, worker="w1")
    return fid, store.jobs.begin_job_fire(sid, fence, jid, fid, to_ms(due), now, start)


def test_one_run_per_fire_id_and_a_refused_recheck_gives_it_back_at_once(store: Store) -> None:
    jid, sid = _job(store, "every 1m", 61)
    due = store.jobs.job(jid).next_due
    fid, first = _begin(store, sid, 1, jid, utcnow(), refusal=RefundReason.EMERGENCY_STOP)
    # Reserved and given back in the one transaction: a row, nothing counted.
    assert isinstance(first.outcome, JobNotStarted)
    assert first.outcome.reason == RefundReason.EMERGENCY_STOP
    assert first.job is not None and first.job.state.fire_count == 0 and first.job.next_due == due
    # The same fire id again is a duplicate, never a second run; a fence not newer is refused
    # (it is no repeat: the run carries another fence).
    again = store.jobs.begin_job_fire(
        sid, 2, jid, fid, to_ms(due or utcnow()), utcnow(), JobStart(1, lambda _j: "p", 5)
    )
    assert isinstance(again.outcome, Duplicate)
    with pytest.raises(StaleFence):
        store.jobs.begin_job_fire(
            sid, 2, jid, fid, to_ms(due or utcnow()), utcnow(), JobStart(1, lambda _j: "p", 5)
        )
    [run] = store.jobs.job_runs(jid)
    assert run.state == RunState.REFUNDED and run.detail == RefundReason.EMERGENCY_STOP
    assert run.started_at is None
    back = store.jobs.job(jid)
    assert back.state.fire_count == 0 and back.next_due == due
    assert back.last_outcome == "refunded: emergency stop"


def test_a_paused_or_not_due_job_reserves_nothing(store: Store) -> None:
    jid, sid = _job(store, "every 1m", 61)
    now = utcnow()
    store.jobs.pause_job(jid, now)
    store.jobs.resume_job(jid, now)  # re-anchored now: due a minute later
    fid, begun = _begin(store, sid, 1, jid, now)
    assert isinstance(begun.outcome, Refused) and begun.outcome.reason == RefusalReason.NOT_DUE
    assert begun.job is not None and begun.outcome.next_due_at == begun.job.next_due
    store.jobs.pause_job(jid, now)
    later, start = now + timedelta(minutes=2), JobStart(1, str, 5)
    begun = store.jobs.begin_job_fire(sid, 2, jid, fid, to_ms(now), later, start)
    assert isinstance(begun.outcome, Refused) and begun.outcome.reason == RefusalReason.INACTIVE
    assert begun.job is not None and begun.job.next_due is None
    assert store.jobs.job_runs(jid) == []
    gone = store.jobs.begin_job_fire(sid, 3, "j-gone", "job:j-gone:1", 1, now, start)
    assert isinstance(gone.outcome, Refused) and gone.outcome.reason == RefusalReason.NO_JOB
    assert gone.job is None


def test_a_one_shot_completes_at_its_finish_and_cancel_says_so(store: Store) -> None:
    jid, sid = _job(store, "in 1m", 61)
    now = utcnow()
    fid, begun = _begin(store, sid, 1, jid, now)
    started = begun.outcome
    assert isinstance(started, JobStarted) and started.job.next_due is None
    assert started.job.state.fire_count == 1 and started.message.text == "p"
    # A repeat after its COMMIT was cut off answers what that COMMIT stored.
    due_ms = int(fid.rsplit(":", 1)[1])
    repeat = store.jobs.begin_job_fire(sid, 1, jid, fid, due_ms, now, JobStart(1, str, 5))
    assert isinstance(repeat.outcome, JobStarted) and repeat.outcome.run.id == started.run.id
    assert repeat.outcome.message.id == started.message.id
    store.ledger.mark_delivering(started.run.key, 1, now, channel="file", kind="heartbeat")
    for _ in range(2):  # the second: a repeat after a lost answer
        done = store.jobs.finish_job_fire(
            started.run.key, RunState.COMPLETED, 1, now, reply="r", reply_kind="assistant"
        )
        assert done.job.status == JobStatus.COMPLETED and done.job.next_due is None
        assert done.run.state == RunState.COMPLETED
    assert store.jobs.job(jid).last_outcome == "completed"
    with pytest.raises(InvalidState, match="already completed"):
        store.jobs.cancel_job(jid, now)
    other, _ = _job(store, "every 1h", 0)
    store.jobs.cancel_job(other, now)
    with pytest.raises(InvalidState, match="already cancelled"):
        store.jobs.cancel_job(other, now)
    assert store.jobs.restorable_jobs_page("", 10).entries == []


def test_a_newer_grant_ends_a_started_run_failed_and_it_still_counts(store: Store) -> None:
    jid, sid = _job(store, "every 1m", 61)
    fid, begun = _begin(store, sid, 1, jid, utcnow())
    assert isinstance(begun.outcome, JobStarted)
    due = begun.outcome.run.due_at
    assert due is not None
    start = JobStart(1, lambda _j: "p", 5)
    again = store.jobs.begin_job_fire(sid, 2, jid, fid, to_ms(due), utcnow(), start)
    assert isinstance(again.outcome, Duplicate)
    [run] = store.jobs.job_runs(jid)
    assert (run.state, run.detail) == (RunState.FAILED, "lock lost before delivery")
    assert store.jobs.job(jid).state.fire_count == 1


def _reserved(store: Store, jid: str, sid: str, now: datetime) -> RunView:
    """A reservation as a worker of the two-step begin (before ``begin_job_fire``) left it,
    counted and waiting for its start: what beat's orphan pass still gives back."""
    with OrmSession(store.engine) as db, db.begin():
        row = db.get(JobRow, jid)
        assert row is not None
        state = job_state(row)
        due = state.next_due()
        assert due is not None
        values = reserved_values(
            f"job:{jid}:{to_ms(due)}", sid, state, fence=1, due_ms=to_ms(due), now=now,
            worker="w1", deferred=False, job_id=jid,
        )  # fmt: skip
        run = RunRow(**values)
        db.add(run)
        apply_job_state(row, jobs.reserve(state, now), now)
        db.flush()
        return run_view(run)


def test_stale_reservations_oldest_first_at_most_limit_and_refunded_once(store: Store) -> None:
    """Orphan recovery reads a bounded page of the ledger, through an index (issue 10): a
    reservation an older worker left (a run now starts in the transaction that reserves it,
    so none waits)."""
    reserved = []
    for age in (61, 62):
        jid, sid = _job(store, "every 1m", age)
        reserved.append(_reserved(store, jid, sid, utcnow()))
    later = utcnow() + timedelta(minutes=1)
    assert [r.id for r in store.ledger.stale_reservations(later)] == [r.id for r in reserved]
    assert [r.id for r in store.ledger.stale_reservations(later, limit=1)] == [reserved[0].id]
    refunded = store.ledger.refund_orphan(reserved[0].key, later)
    assert refunded is not None and refunded.state == RunState.REFUNDED
    assert store.ledger.refund_orphan(reserved[0].key, later) is None
    assert [r.id for r in store.ledger.stale_reservations(later)] == [reserved[1].id]
