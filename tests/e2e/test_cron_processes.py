"""Cron jobs on real `hbgw beat` and `hbgw worker` processes: two beats and a worker killed
mid-run still give one run per due time."""

from __future__ import annotations

import signal
from collections import defaultdict
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from support.harness import Gateway, gateway_settings, wait_until
from support.jobs import add_job
from support.scenarios import check_gateway

from hbgw.procs import spawn_hbgw, stop_all
from hbgw.sessions.states import REACHED_AGENT, RunState
from hbgw.state.beat_registry import BeatRegistry

pytestmark = pytest.mark.timeout(300)


def test_two_beats_and_a_killed_worker_give_one_run_per_due_time(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    settings = gateway_settings(
        tmp_path, redis_url, redis_ns, agent="echo", echo_delay=1.0, lock_lease=2, worker_ttl=2
    )
    gw = Gateway(settings, redis_url)
    beats = BeatRegistry(gw.rt.client, gw.rt.keys, ttl_ms=int(settings.beat_ttl * 1000))
    roles = [["worker", "--name", "w1"], ["worker", "--name", "w2"], ["beat"], ["beat"]]
    procs = [spawn_hbgw(r, env=gw.env(), log=tmp_path / f"p{i}.log") for i, r in enumerate(roles)]
    try:
        wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()) == ["w1", "w2"], 60, "workers")
        wait_until(lambda: len(beats.live(gw.rt.now_ms())) == 2, 60, "both beats")
        jobs = [add_job(gw, "every 2s", session=gw.session(chat=f"C{i}")) for i in range(8)]
        jobs += [add_job(gw, "every 2s") for _ in range(4)]  # fresh sessions per run

        def running_on_w1() -> object:
            return next(
                (r for r in gw.runs() if r.worker == "w1" and r.state == RunState.STARTED), None
            )

        wait_until(running_on_w1, 60, "a job's run in w1")
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        wait_until(lambda: len(gw.runs()) >= 60, 180, "dozens of runs after the kill")
    finally:
        stop_all(procs, timeout=20)
    runs = gw.runs()
    assert all(r.job_id for r in runs)
    assert len({r.fire_id for r in runs}) == len(runs)  # one run per fire id
    by_job = defaultdict(list)
    for run in runs:
        if run.state in REACHED_AGENT:
            by_job[run.job_id].append(run.reserved_at)
    assert len(by_job) == len(jobs)
    for job_id, times in by_job.items():
        times.sort()
        # One run per due time: two runs of a 2 s job are never closer than 2 s.
        assert all(b - a >= timedelta(milliseconds=1999) for a, b in pairwise(times)), job_id
    report = check_gateway(gw, include_index=False)
    assert report.ok, report.to_json()
    gw.close()
