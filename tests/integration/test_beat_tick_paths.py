"""What beat's restore pass settles as it begins (beat/core.py), on real Redis, SQL and Celery.

Orphan recovery: a reservation an older worker left (its begin came in two steps, and it died
between them) is given back and due again at once, under a new fire id; one whose schedule
changed since is abandoned and nothing is scheduled; one whose session lock is held, or whose
pass another replica runs, is left alone. Cut-off deliveries: a pending reply whose session
lock is held belongs to a live turn and is left pending.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session as OrmSession
from support.fires import VANISHED_LEASE_MS, lock_free
from support.harness import Gateway
from support.jobs import add_job, ago
from support.scenarios import send

from hbgw.core.clock import to_ms, utcnow
from hbgw.gateway.inbound import Queued
from hbgw.sessions import heartbeat as hb
from hbgw.sessions import jobs
from hbgw.sessions.heartbeat_view import heartbeat_state
from hbgw.sessions.models import DeliveryRow, HeartbeatRow, JobRow, RunRow
from hbgw.sessions.states import DeliveryState, RefundReason, RunState, fire_id, job_member
from hbgw.sessions.store.heartbeat_records import apply_state
from hbgw.sessions.store.job_records import apply_job_state, job_state
from hbgw.sessions.store.reservations import reserved_values
from hbgw.sessions.store.run_views import run_view
from hbgw.sessions.views import Outbound, RunView
from hbgw.state.restore_sweep import RestoreSweep
from hbgw.state.turn_gate import Began

OLDER = "older-worker"
LIVE_LEASE_MS = 60_000  # a turn that is alive after all: its lock held for the whole test


def reserved_by_an_older_worker(
    gw: Gateway, sid: str, at: datetime, *, job_id: str | None = None, lease_ms: int
) -> RunView:
    """An older worker's two-step begin, cut between its steps: the grant (the lock, with
    ``lease_ms``; its fence claimed in SQL), then the reservation — counted, never started."""
    with OrmSession(gw.store.engine) as db, db.begin():
        if job_id is None:
            hb_row = db.scalars(select(HeartbeatRow).where(HeartbeatRow.session_id == sid)).one()
            state = heartbeat_state(hb_row)
            due = state.next_due()
            assert due is not None
            fid = fire_id(sid, to_ms(due))
        else:
            job_row = db.get(JobRow, job_id)
            assert job_row is not None
            job = job_state(job_row)
            due = job.next_due()
            assert due is not None
            fid = f"{job_member(job_id)}:{to_ms(due)}"
    began = gw.rt.gate.try_begin_fire(sid, fid, OLDER, lease_ms)
    assert isinstance(began, Began)
    gw.store.ledger.claim_fence(sid, began.fence, at)
    with OrmSession(gw.store.engine) as db, db.begin():
        if job_id is None:
            hb_row = db.scalars(select(HeartbeatRow).where(HeartbeatRow.session_id == sid)).one()
            state = heartbeat_state(hb_row)
            values = reserved_values(
                fid, sid, state, fence=began.fence, due_ms=to_ms(due), now=at, worker=OLDER,
                deferred=False, heartbeat_id=hb_row.id,
            )  # fmt: skip
            apply_state(hb_row, hb.reserve(state, at), at)
        else:
            job_row = db.get(JobRow, job_id)
            assert job_row is not None
            job = job_state(job_row)
            values = reserved_values(
                fid, sid, job, fence=began.fence, due_ms=to_ms(due), now=at, worker=OLDER,
                deferred=False, job_id=job_id,
            )  # fmt: skip
            apply_job_state(job_row, jobs.reserve(job, at), at)
        run = RunRow(**values)
        db.add(run)
        db.flush()
        return run_view(run)


def orphan(gw: Gateway, kind: str, *, lease_ms: int = VANISHED_LEASE_MS) -> tuple[RunView, str]:
    """A reservation left ``kind`` ("heartbeat" or "job") older than a lock lease, and its
    member in the due index."""
    at = utcnow() - timedelta(seconds=gw.settings.lock_lease + 10)
    sid = gw.session()
    if kind == "heartbeat":
        gw.due_now(sid, missed=1)
        return reserved_by_an_older_worker(gw, sid, at, lease_ms=lease_ms), sid
    job = add_job(gw, "every 1m", session=sid, set_at=ago(121))
    run = reserved_by_an_older_worker(gw, sid, at, job_id=job.id, lease_ms=lease_ms)
    return run, job_member(job.id)


def fire_count(gw: Gateway, run: RunView) -> int:
    if run.job_id is not None:
        return gw.store.jobs.job(run.job_id).state.fire_count
    return int(
        gw.store.heartbeats.heartbeat_status(run.session_id, utcnow()).to_json()["fire_count"]
    )


def state_of(gw: Gateway, run: RunView) -> RunState:
    [found] = [r for r in gw.store.ledger.runs(run.session_id) if r.id == run.id]
    return found.state


@pytest.mark.parametrize("kind", ["heartbeat", "job"])
def test_a_reservation_an_older_worker_left_is_given_back_and_fires_again_at_once(
    gateway: Gateway, kind: str
) -> None:
    gw = gateway
    run, member = orphan(gw, kind)
    assert fire_count(gw, run) == 1
    lock_free(gw, run.session_id)
    now_ms = gw.rt.now_ms()
    gw.beat.restore_now(now_ms)  # orphan recovery runs as the pass begins
    [refunded] = [r for r in gw.store.ledger.runs(run.session_id) if r.id == run.id]
    assert (refunded.state, refunded.detail) == (RunState.REFUNDED, RefundReason.ORPHANED.value)
    assert fire_count(gw, run) == 0  # the count is exact again
    assert gw.rt.index.due_ms(member) == now_ms  # due now, not one interval later
    assert gw.beat.recover_orphans(utcnow()) == 0  # given back once
    with gw.worker("w1"):
        gw.tick()
        if kind == "heartbeat":
            runs = gw.final_runs(run.session_id, count=2)
        else:
            assert run.job_id is not None
            runs = [r for r in gw.final_runs(run.session_id, count=2) if r.job_id == run.job_id]
    assert sorted(r.state for r in runs) == sorted([RunState.REFUNDED, RunState.COMPLETED])
    assert len({r.fire_id for r in runs}) == 2  # under a new fire id
    assert fire_count(gw, run) == 1


@pytest.mark.parametrize("kind", ["heartbeat", "job"])
def test_an_orphan_whose_schedule_changed_since_is_abandoned_and_nothing_is_scheduled(
    gateway: Gateway, kind: str
) -> None:
    """The newer configuration wins: the count and anchor stay as it left them, and the
    cleared heartbeat (the cancelled job) gets no due entry back."""
    gw = gateway
    run, member = orphan(gw, kind)
    if run.job_id is None:
        gw.store.heartbeats.clear_heartbeat(run.session_id, utcnow())
    else:
        gw.store.jobs.cancel_job(run.job_id, utcnow())
    lock_free(gw, run.session_id)
    assert gw.beat.recover_orphans(utcnow()) == 1
    assert state_of(gw, run) == RunState.ABANDONED
    assert gw.rt.index.due_ms(member) is None


def test_an_orphan_whose_session_lock_is_held_is_left_to_the_turn_that_holds_it(
    gateway: Gateway,
) -> None:
    """A held lock is a live turn: its own grant settles what older turns left, fenced."""
    gw = gateway
    run, _member = orphan(gw, "heartbeat", lease_ms=LIVE_LEASE_MS)
    assert gw.beat.recover_orphans(utcnow()) == 0
    assert state_of(gw, run) == RunState.RESERVED
    assert fire_count(gw, run) == 1


def test_a_beat_whose_restore_pass_another_replica_runs_leaves_the_orphans_to_that_pass(
    gateway: Gateway,
) -> None:
    gw = gateway
    run, _member = orphan(gw, "heartbeat")
    lock_free(gw, run.session_id)
    other = RestoreSweep(gw.rt.client, gw.rt.keys)
    assert other.acquire("other-beat", 10_000)  # another replica is in its restore step
    report = gw.beat.restore_now(gw.rt.now_ms())
    assert not report.ran
    assert state_of(gw, run) == RunState.RESERVED
    other.release("other-beat")  # its step ended; the next pass that begins here recovers it
    report = gw.beat.restore_now(gw.rt.now_ms())
    assert report.ran and report.ok
    assert state_of(gw, run) == RunState.REFUNDED


def test_a_pending_reply_whose_session_lock_is_held_is_not_declared_cut_off(
    gateway: Gateway,
) -> None:
    """The reply's record is pending past HBGW_DEAD_AFTER, but its turn still holds the lock
    (a slow send): its outcome is that turn's to write, not ``unknown``."""
    gw = gateway
    sid = gw.session()
    queued = send(gw, sid, "hello")
    assert isinstance(queued, Queued)
    turn = gw.rt.gate.try_begin_user(sid, "slow-sender", LIVE_LEASE_MS)
    assert isinstance(turn, Began)
    long_ago = utcnow() - timedelta(seconds=gw.settings.dead_after + 60)
    gw.store.ledger.claim_fence(sid, turn.fence, long_ago)
    gw.store.ledger.begin_reply(
        sid,
        gw.store.messages.message_turn(queued.message_id, sid, history=0).message.key,
        turn.fence,
        long_ago,
        channel="file",
        outbound=[Outbound(f"msg:{queued.message_id}", "reply")],
    )
    assert gw.beat.settle_cut_off(utcnow()) == 0
    with OrmSession(gw.store.engine) as db:
        states = db.scalars(select(DeliveryRow.state).where(DeliveryRow.session_id == sid)).all()
    assert states == [DeliveryState.PENDING]
