"""The cron-job store on SQLite and PostgreSQL: the ledger's UNIQUE fire id, reservation and
refund for a job's run, completion, and cancel twice."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hbgw.core.clock import to_ms, utcnow
from hbgw.core.errors import InvalidState, StaleFence
from hbgw.sessions.grammar.job_schedule import parse_job_schedule
from hbgw.sessions.states import JobStatus, RefundReason, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.views import Duplicate, JobRoute, NewJob, Reserved


def _job(store: Store, schedule: str, age: float) -> tuple[str, str]:
    set_at = utcnow() - timedelta(seconds=age)
    sid = store.sessions.create_session(platform="slack", chat="C1", now=set_at).id
    parsed = parse_job_schedule(schedule, now=set_at, min_interval=60)
    text = f"{schedule} exact"  # on its exact times: the fire ids below name them
    job = store.jobs.create_job(NewJob(parsed, text, "p", JobRoute(session_id=sid)), set_at)
    return job.id, sid


def test_one_reservation_per_fire_id_and_a_refund_gives_it_back(store: Store) -> None:
    jid, sid = _job(store, "every 1m", 61)
    due = store.jobs.job(jid).next_due
    assert due is not None
    fid, now = f"job:{jid}:{to_ms(due)}", utcnow()
    first = store.jobs.claim_job_fire(sid, 1, jid, fid, to_ms(due), now)
    assert isinstance(first.outcome, Reserved) and first.job.state.fire_count == 1
    # A newer grant proves the first turn lost its lock: its reservation is given back, and
    # the same fire id again is a duplicate, never a second run.
    again = store.jobs.claim_job_fire(sid, 2, jid, fid, to_ms(due), now)
    assert isinstance(again.outcome, Duplicate)
    with pytest.raises(StaleFence):
        store.jobs.claim_job_fire(sid, 2, jid, fid, to_ms(due), now)
    [run] = store.jobs.job_runs(jid)
    assert run.state == RunState.REFUNDED and run.detail == RefundReason.ORPHANED
    back = store.jobs.job(jid)
    assert back.state.fire_count == 0 and back.next_due == due


def test_a_one_shot_completes_at_its_finish_and_cancel_says_so(store: Store) -> None:
    jid, sid = _job(store, "in 1m", 61)
    due = store.jobs.job(jid).next_due
    assert due is not None
    fid, now = f"job:{jid}:{to_ms(due)}", utcnow()
    claim = store.jobs.claim_job_fire(sid, 1, jid, fid, to_ms(due), now)
    assert isinstance(claim.outcome, Reserved) and claim.job.next_due is None
    started = store.jobs.start_job_fire(
        claim.outcome.run.key, 1, now, conversation=1, owner_changed=False, prompt="p", history=5
    )
    store.ledger.mark_delivering(started.run.key, 1, now, channel="file", kind="heartbeat")
    done = store.jobs.finish_job_fire(
        started.run.key, RunState.COMPLETED, 1, now, reply="r", reply_kind="assistant"
    )
    assert done.job.status == JobStatus.COMPLETED and done.job.next_due is None
    with pytest.raises(InvalidState, match="already completed"):
        store.jobs.cancel_job(jid, now)
    other, _ = _job(store, "every 1h", 0)
    store.jobs.cancel_job(other, now)
    with pytest.raises(InvalidState, match="already cancelled"):
        store.jobs.cancel_job(other, now)
    assert store.jobs.restorable_jobs_page("", 10).entries == []


def test_stale_reservations_oldest_first_at_most_limit_and_refunded_once(store: Store) -> None:
    """Orphan recovery reads a bounded page of the ledger, through an index (issue 10): a cron
    job's reservation (a heartbeat's starts in the transaction that makes it, so none waits)."""
    reserved = []
    for age in (61, 62):
        jid, sid = _job(store, "every 1m", age)
        due = store.jobs.job(jid).next_due
        assert due is not None
        claim = store.jobs.claim_job_fire(
            sid, 1, jid, f"job:{jid}:{to_ms(due)}", to_ms(due), utcnow()
        )
        assert isinstance(claim.outcome, Reserved)
        reserved.append(claim.outcome.run)
    later = utcnow() + timedelta(minutes=1)
    assert [r.id for r in store.ledger.stale_reservations(later)] == [r.id for r in reserved]
    assert [r.id for r in store.ledger.stale_reservations(later, limit=1)] == [reserved[0].id]
    refunded = store.ledger.refund_orphan(reserved[0].key, later)
    assert refunded is not None and refunded.state == RunState.REFUNDED
    assert store.ledger.refund_orphan(reserved[0].key, later) is None
    assert [r.id for r in store.ledger.stale_reservations(later)] == [reserved[1].id]
