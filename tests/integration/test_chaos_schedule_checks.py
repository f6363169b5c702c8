"""The chaos checks of cron jobs and heartbeat policies (chaos/schedule_checks.py), fed
constructed evidence: a due time run twice, a fire outside active hours, a jittered heartbeat
or job fired before its offset and a job's run overlapping its session's heartbeat are each flagged;
a clean run with jobs and policies passes."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from chaos.checks import Check, run_checks
from chaos.collect import read_jobs
from chaos.evidence import Attempt, Delivery, Evidence, Heartbeat, Job, Run
from hbgw.sessions.grammar.job_schedule import parse_job_schedule
from hbgw.sessions.jitter import jitter_offset
from hbgw.sessions.store import Store
from hbgw.sessions.views import JobRoute, NewJob

T = 1_767_261_600.0  # 2026-01-01T10:00:00Z; the fake run lasts a minute
S, FRESH = "s1", "s2"
JOB = "j000000000001"


def _fire(sid: str, fence: int, due: float, *, job: str | None = None) -> Run:
    fire_id = f"job:{job}:{int(due * 1000)}" if job else f"{sid}:{int(due * 1000)}"
    return Run(fire_id, sid, fence, "completed", due, due + 0.01, due + 0.2, "w1", job=job)


def _sends(runs: list[Run]) -> list[Delivery]:
    return [Delivery("send", r.session, r.reserved + 0.1, "heartbeat", ref=r.fire_id) for r in runs]


def clean() -> Evidence:
    """A heartbeat every 4 s in S with a job every 4 s in between (2 s later), and a job every
    5 s into fresh sessions; all of it inside 09:00-18:00 UTC."""
    beats = [_fire(S, 2 * i, T + 4 * i) for i in range(1, 15)]
    jobs = [_fire(S, 2 * i + 1, T + 4 * i + 2, job=JOB) for i in range(1, 14)]
    fresh = [_fire(f"f{i}", 1, T + 5 * i, job="j000000000002") for i in range(1, 11)]
    runs = beats + jobs + fresh
    return Evidence(
        runs=runs,
        deliveries=_sends(runs),
        heartbeats=[Heartbeat(S, 4.0, T, hours="09:00-18:00 UTC")],
        jobs=[Job(JOB, S, 4.0, T), Job("j000000000002", None, 5.0, T)],
        snapshot=T + 60,
        grace=5.0,
        allowance=3.0,
        attempts=[Attempt("slack session on C0VICTIM", 403, "Owner mallory may not …", True)],
    )


def add(ev: Evidence, *runs: Run) -> Evidence:
    """``ev`` with ``runs`` in the ledger and sent."""
    return replace(ev, runs=[*ev.runs, *runs], deliveries=[*ev.deliveries, *_sends(list(runs))])


def failing(ev: Evidence) -> dict[str, Check]:
    return {c.name: c for c in run_checks(ev) if not c.ok}


def test_a_clean_run_with_jobs_and_policies_passes() -> None:
    assert failing(clean()) == {}


def test_a_jobs_due_time_run_twice_is_flagged() -> None:
    ev = clean()
    again = _fire("f99", 1, T + 5 * 3 + 0.5, job="j000000000002")  # another session, one period
    bad = failing(add(ev, again))
    assert set(bad) == {"one_run_per_due_time"}
    assert "j000000000002" in bad["one_run_per_due_time"].failures[0]


def test_a_heartbeats_due_time_fired_again_under_another_id_is_flagged() -> None:
    ev = clean()
    again = _fire(S, 99, T + 59.0)  # 3 s after the last fire of a 4 s heartbeat
    assert set(failing(add(ev, again))) == {"one_run_per_due_time"}


def test_a_cron_jobs_late_run_then_the_next_on_time_is_not_a_second_run() -> None:
    """Chaos quick: `* * * * *` reserved 1.7 s late (a fault), the next minute on time: 58.3 s
    apart, their ids a minute apart. A cron job's times are fixed; a second run of one of them
    (its id a refusal's back-off later) is still flagged."""
    cron = "j000000000003"
    late = replace(_fire("c1", 1, T, job=cron), reserved=T + 1.7)
    on_time = _fire("c2", 1, T + 60, job=cron)
    ev = replace(clean(), jobs=[*clean().jobs, Job(cron, None, 60.0, T - 60, fixed=True)])
    assert "one_run_per_due_time" not in failing(add(ev, late, on_time))
    again = replace(_fire("c3", 1, T + 1, job=cron), reserved=T + 2.5)  # the same minute
    assert set(failing(add(ev, late, again))) == {"one_run_per_due_time"}


def test_a_run_the_retry_ladder_gave_back_is_not_a_second_run() -> None:
    ev = clean()
    first = replace(ev.runs[-1], state="failed", detail="model unreachable, retry 1 of 3 at …")
    retried = _fire(first.session, 2, first.reserved + 1, job=first.job)
    ev.runs[-1:] = [first, retried]
    ev.deliveries = _sends(ev.runs)
    assert "one_run_per_due_time" not in failing(ev)


def test_a_jobs_run_overlapping_its_sessions_heartbeat_is_an_overlap() -> None:
    ev = clean()
    beat = ev.runs[0]  # runs from T + 4 to T + 4.2 in S
    overlapping = Run(f"job:{JOB}:{int((T + 4.1) * 1000)}", S, 100, "completed", T + 4.1,
                      T + 4.1, T + 4.3, "w2", job=JOB)  # fmt: skip
    ev.runs = [r for r in ev.runs if r.fire_id != f"job:{JOB}:{int((T + 6) * 1000)}"]
    ev.runs.append(overlapping)
    ev.deliveries = _sends(ev.runs)
    bad = failing(ev)
    assert "no_overlapping_turns" in bad
    assert beat.fire_id in " ".join(bad["no_overlapping_turns"].failures)


def test_a_heartbeat_outside_its_active_hours_never_fires() -> None:
    ev = clean()
    night = "22:00-23:00 UTC"  # the run is at 10:00
    ev.heartbeats.append(Heartbeat("s3", 5.0, T, hours=night))
    assert failing(ev) == {}  # not firing is right: not late, not unrecovered
    bad = failing(add(ev, _fire("s3", 1, T + 5)))
    assert set(bad) == {"no_fire_outside_active_hours"}
    assert night in bad["no_fire_outside_active_hours"].failures[0]


def _jittered(period: float) -> tuple[str, float]:
    """A session id whose offset for ``period`` is at least 2 s, and that offset."""
    for n in range(1000):
        sid = f"s{n:015x}"
        offset = jitter_offset(sid, period).total_seconds()
        if offset >= 2:
            return sid, offset
    raise AssertionError("no seed with an offset")


def test_a_jittered_heartbeat_fires_once_per_due_time_after_its_offset() -> None:
    ev = clean()
    sid, offset = _jittered(40.0)
    first = T + 40 + offset
    ev.heartbeats.append(Heartbeat(sid, 40.0, T, jittered=True))
    assert failing(add(ev, _fire(sid, 1, first))) == {}
    early = add(ev, _fire(sid, 1, T + 40))  # the offset not applied
    assert set(failing(early)) == {"jitter_applied"}
    twice = add(ev, _fire(sid, 1, first), _fire(sid, 2, first + 1))  # one due time, two ids
    assert set(failing(twice)) == {"one_run_per_due_time"}


def _jittered_job(period: float) -> tuple[str, float]:
    """A job id whose offset for ``period`` is at least 2 s, and that offset."""
    for n in range(1000):
        job = f"jt{n:011x}"  # not the ids of clean()'s jobs
        offset = jitter_offset(job, period).total_seconds()
        if offset >= 2:
            return job, offset
    raise AssertionError("no seed with an offset")


def test_a_jittered_cron_job_at_the_top_of_the_hour_runs_after_its_offset() -> None:
    job, offset = _jittered_job(3600.0)
    hourly = Job(job, None, 3600.0, T - 60, fixed=True, first_due=T + offset, offset=offset)
    ev = replace(clean(), jobs=[*clean().jobs, hourly])
    assert failing(add(ev, _fire("c1", 1, T + offset, job=job))) == {}
    at_the_hour = failing(add(ev, _fire("c1", 1, T, job=job)))  # the offset not applied
    assert set(at_the_hour) == {"jitter_applied"}
    assert f"job {job}" in at_the_hour["jitter_applied"].failures[0]
    # Reserved late, but its id names the hour itself: the due time had no offset either.
    late = replace(_fire("c1", 1, T, job=job), reserved=T + offset + 1)
    assert set(failing(add(ev, late))) == {"jitter_applied"}


def test_a_jittered_interval_job_runs_after_its_offset_and_an_exact_one_is_not_checked() -> None:
    job, offset = _jittered_job(40.0)
    every = Job(job, None, 40.0, T, first_due=T + 40 + offset, offset=offset)
    ev = replace(clean(), jobs=[*clean().jobs, every])
    assert failing(add(ev, _fire("i1", 1, T + 40 + offset, job=job))) == {}
    assert set(failing(add(ev, _fire("i1", 1, T + 40, job=job)))) == {"jitter_applied"}
    exact = replace(ev, jobs=[*clean().jobs, replace(every, first_due=None, offset=0.0)])
    assert failing(add(exact, _fire("i1", 1, T + 40, job=job))) == {}
    figures = {c.name: c for c in run_checks(add(ev, _fire("i1", 1, T + 40 + offset, job=job)))}
    assert figures["jitter_applied"].figures["jittered_jobs_with_an_offset"] == 1


def test_the_collector_gives_a_jittered_job_its_first_due_time_with_the_offset(
    store: Store,
) -> None:
    now = datetime.fromisoformat("2026-01-01T09:20:00+00:00")
    route = JobRoute(platform="slack", chat="C1")
    hourly = store.jobs.create_job(
        NewJob(parse_job_schedule("@hourly", now=now, min_interval=60), "@hourly", "p", route),
        now,
    )
    exact = store.jobs.create_job(
        NewJob(
            parse_job_schedule("@hourly", now=now, min_interval=60), "@hourly exact", "p", route
        ),
        now,
    )
    found = {j.id: j for j in read_jobs(store.engine)}
    offset = jitter_offset(hourly.id, 3600.0).total_seconds()
    top = datetime.fromisoformat("2026-01-01T10:00:00+00:00").timestamp()
    assert (found[hourly.id].first_due, found[hourly.id].offset) == (top + offset, offset)
    assert found[exact.id].first_due is None
