"""Cron jobs end to end on real Redis, Celery workers and SQL, beat driven by the test.

Each schedule form fires on time from a backdated job (never a sleep); a one-shot completes
and never fires again; missed runs after downtime coalesce into one (or are skipped).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.harness import Gateway, wait_until
from support.jobs import add_job, ago, job_runs
from support.scenarios import assert_invariants

from hbgw.core.clock import iso, to_ms, utcnow
from hbgw.core.errors import InvalidState
from hbgw.sessions.grammar.job_schedule import job_next_fire
from hbgw.sessions.states import JobStatus, MissedPolicy, RunState, job_member


def test_a_one_shot_runs_in_a_fresh_session_completes_and_never_fires_again(
    gateway: Gateway,
) -> None:
    gw = gateway
    job = add_job(gw, "in 10m", "remind me", set_at=ago(601))
    with gw.worker("w1"):
        gw.tick()
        [run] = job_runs(gw, job.id)
        for _ in range(3):
            gw.tick()
    assert run.state == RunState.COMPLETED and run.job_id == job.id
    assert gw.store.jobs.job(job.id).status == JobStatus.COMPLETED
    assert gw.rt.index.due_ms(job_member(job.id)) is None
    assert len(gw.store.jobs.job_runs(job.id)) == 1
    [sent] = gw.deliveries(run.session_id, "send")
    assert sent["chat"] == "CJ" and f"Cron job {job.id}" in sent["text"]
    assert run.delivery is not None and run.delivery.state == "sent"
    assert_invariants(gw)


@pytest.mark.parametrize(
    ("schedule", "age"),
    [
        ("every 2m", 121),
        ("@hourly", 3601),
        ("*/5 * * * *", 301),
        ("TZ=Asia/Tokyo 0 * * * *", 3601),
    ],
)
def test_each_repeating_form_fires_once_at_its_due_time_and_is_due_again(
    gateway: Gateway, schedule: str, age: int
) -> None:
    gw = gateway
    job = add_job(gw, schedule, set_at=ago(age))
    assert job.next_due is not None and job.next_due <= utcnow()
    with gw.worker("w1"):
        gw.tick()
        [run] = job_runs(gw, job.id)
        gw.tick()
    assert run.state == RunState.COMPLETED
    assert run.due_at is not None and abs(run.due_at - job.next_due) < timedelta(seconds=1)
    after = gw.store.jobs.job(job.id)
    assert after.status == JobStatus.ACTIVE and after.state.fire_count == 1
    assert after.next_due is not None
    # Re-anchored at the fire (rule 4), and the index holds that next time.
    assert after.next_due == job_next_fire(after.state.schedule, run.reserved_at, 1)
    assert gw.rt.index.due_ms(job_member(job.id)) == to_ms(after.next_due)
    assert len(gw.store.jobs.job_runs(job.id)) == 1


def test_an_at_job_fires_at_its_time_and_not_before(gateway: Gateway) -> None:
    gw = gateway
    soon = add_job(gw, f"at {iso(utcnow() + timedelta(minutes=5))}")
    due = add_job(gw, f"at {iso(ago(30))}", set_at=ago(60))
    with gw.worker("w1"):
        gw.tick()
        [run] = job_runs(gw, due.id)
        gw.tick()
    assert run.due_at is not None and due.next_due is not None
    assert abs(run.due_at - due.next_due) < timedelta(seconds=1)
    assert gw.store.jobs.job_runs(soon.id) == []
    assert gw.store.jobs.job(soon.id).status == JobStatus.ACTIVE


def test_times_n_completes_after_the_nth_run(gateway: Gateway) -> None:
    gw = gateway
    job = add_job(gw, "every 1m", times=1, set_at=ago(61))
    with gw.worker("w1"):
        gw.tick()
        job_runs(gw, job.id)
    assert gw.store.jobs.job(job.id).status == JobStatus.COMPLETED


def test_catch_up_after_downtime_gives_one_run(gateway: Gateway) -> None:
    gw = gateway
    job = add_job(gw, "every 1m", set_at=ago(601))  # ten due times passed with no worker
    with gw.worker("w1"):
        for _ in range(3):
            gw.tick()
        [run] = job_runs(gw, job.id)
        for _ in range(3):
            gw.tick()
    assert run.missed == 9
    assert len(gw.store.jobs.job_runs(job.id)) == 1
    assert gw.store.jobs.job(job.id).state.fire_count == 1


def test_skip_runs_nothing_for_missed_due_times_and_goes_on_from_now(gateway: Gateway) -> None:
    gw = gateway
    job = add_job(gw, "every 1m", set_at=ago(601), missed=MissedPolicy.SKIP)
    with gw.worker("w1"):
        gw.tick()

        def moved() -> bool:
            after = gw.store.jobs.job(job.id)
            return after.next_due is not None and after.next_due > utcnow()

        wait_until(moved, what="the skipped job to move on")
    assert gw.store.jobs.job_runs(job.id) == []
    after = gw.store.jobs.job(job.id)
    assert after.last_outcome == "skipped missed runs" and after.next_due is not None
    assert gw.rt.index.due_ms(job_member(job.id)) == to_ms(after.next_due)


def test_cancelling_a_cancelled_job_says_already_cancelled(gateway: Gateway) -> None:
    gw = gateway
    job = add_job(gw, "every 1m")
    gw.store.jobs.cancel_job(job.id, utcnow())
    with pytest.raises(InvalidState, match="already cancelled"):
        gw.store.jobs.cancel_job(job.id, utcnow())
    gw.rt.due.settle_job(job.id)
    assert gw.rt.index.due_ms(job_member(job.id)) is None
