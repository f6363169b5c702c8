"""Cron jobs end to end on real Redis, Celery workers and SQL, beat driven by the test.

Each schedule form fires on time from a backdated job; a one-shot completes and never fires
again. Jobs are backdated instead of waiting for their time to come.
"""

from __future__ import annotations

from datetime import timedelta

from support.harness import Gateway, wait_until
from support.jobs import add_job, ago, job_runs
from support.scenarios import assert_invariants

from core.clock import to_ms, utcnow
from sessions.states import JobStatus, RunState, job_member


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
    assert gw.store.job(job.id).status == JobStatus.COMPLETED
    assert gw.rt.index.due_ms(job_member(job.id)) is None
    assert len(gw.store.job_runs(job.id)) == 1
    [sent] = gw.deliveries(run.session_id, "send")
    assert sent["chat"] == "CJ" and f"Cron job {job.id}" in sent["text"]
    assert run.session_id != job.route.session_id  # a fresh session of its own
    assert_invariants(gw)
