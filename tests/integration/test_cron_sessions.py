"""Cron jobs aimed at an existing session: turns under its lock, idle only, user messages first,
never overlapping its heartbeat; and jobs fire only after restore has put the index back."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from support.harness import Gateway, gateway_settings, wait_until
from support.jobs import add_job, ago, job_runs
from support.scenarios import assert_invariants, send

from hbgw.core.clock import to_ms
from hbgw.sessions.states import REACHED_AGENT, RunState, job_member
from hbgw.state.restore_sweep import RestoreSweep


def _hold(gw: Gateway, sid: str, gate: Path) -> None:
    """A user turn held in the agent until ``gate`` exists: the session is busy."""
    send(gw, sid, f"HOLD {gate}")
    wait_until(lambda: gw.rt.gate.lock_holder(sid), what="the held user turn to take the lock")


def test_a_job_due_while_its_session_is_busy_waits_for_idle_and_runs_once(
    gateway: Gateway, tmp_path: Path
) -> None:
    gw = gateway
    sid = gw.session()
    gate = tmp_path / "go"
    with gw.worker("w1"):
        _hold(gw, sid, gate)
        job = add_job(gw, "every 1m", session=sid, set_at=ago(61))
        gw.tick()
        member = job_member(job.id)
        wait_until(lambda: member in gw.rt.gate.pending_jobs(sid), what="the job to wait pending")
        send(gw, sid, "second message")  # queued behind the held turn: it runs before the job
        assert gw.store.jobs.job_runs(job.id) == []  # never interrupts the running turn
        gate.touch()
        [run] = job_runs(gw, job.id)
        for _ in range(3):
            gw.tick()
    assert run.deferred and run.state == RunState.COMPLETED and run.session_id == sid
    replies = [m for m in gw.store.messages.list_messages(sid) if m.reply_to is not None]
    assert len(replies) == 2 and run.started_at is not None
    assert all(run.started_at >= r.created_at for r in replies)  # user messages first
    assert len(gw.store.jobs.job_runs(job.id)) == 1
    assert_invariants(gw)


def test_a_job_and_the_heartbeat_of_one_session_never_overlap(
    gateway: Gateway, tmp_path: Path
) -> None:
    gw = gateway
    sid = gw.session()
    gate = tmp_path / "go"
    with gw.worker("w1"):
        _hold(gw, sid, gate)
        gw.due_now(sid, seconds=60)
        first = add_job(gw, "every 1m", "first job", session=sid, set_at=ago(61))
        second = add_job(gw, "every 1m", "second job", session=sid, set_at=ago(61))
        gw.tick()
        wait_until(lambda: gw.rt.gate.pending(sid), what="the heartbeat to wait pending")
        wait_until(lambda: len(gw.rt.gate.pending_jobs(sid)) == 2, what="both jobs pending")
        gate.touch()  # neither replaces the other: all three run, one after the other
        gw.final_runs(sid, count=3)
    runs = sorted((r for r in gw.runs(sid) if r.state in REACHED_AGENT), key=lambda r: r.fence)
    assert {r.job_id for r in runs} == {None, first.id, second.id}
    for before, after in pairwise(runs):
        assert before.finished_at is not None and after.started_at is not None
        assert before.finished_at <= after.started_at, (before, after)
    assert len({r.fence for r in runs}) == 3  # each its own grant
    assert_invariants(gw)


def test_jobs_fire_only_after_restore_has_put_the_index_back(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    # One row per restore step: the rebuild takes several ticks.
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns, restore_page=1), redis_url)
    try:
        for n in range(3):
            gw.heartbeat(gw.session(chat=f"C{n}"), seconds=3600)
        job = add_job(gw, "every 1m", set_at=ago(61))
        member = job_member(job.id)
        due = gw.rt.index.due_ms(member)
        assert due is not None
        with gw.worker("w1"):
            report = gw.beat.restore_step(gw.rt.now_ms())
            assert report.rebuilding  # no epoch yet: Redis is new, the rebuild is under way
            gw.beat.dispatch_due(gw.rt.now_ms(), ["w1"], jobs=not report.rebuilding)
            assert gw.rt.index.due_ms(member) == due  # held back as it was, not claimed
            assert gw.store.jobs.job_runs(job.id) == []
            sweep = RestoreSweep(gw.rt.client, gw.rt.keys)
            while not gw.store.jobs.job_runs(job.id):
                lost_before = sweep.read().lost
                gw.tick()
                # Dispatched by a tick only once the rebuild had ended (in that tick or before).
                assert not gw.store.jobs.job_runs(job.id) or not sweep.read().lost, lost_before
            [run] = job_runs(gw, job.id)
        assert run.state == RunState.COMPLETED
        assert run.due_at is not None and to_ms(run.due_at) == due
    finally:
        gw.close()
