"""The largest one-second burst of due times for heartbeats, and for cron jobs, all set in the
same second.

Pure computation of due times with the domain's own ``next_due`` (no Redis, no SQL): N
heartbeats set at 12:00:00, every hour and ``@hourly``, with jitter and ``exact``; N cron jobs
added at 12:00:00 (``jobs``), ``@hourly`` and ``0 * * * *`` (due at the top of the next hour)
and ``every 1h``, with jitter and ``exact``, each with its own job id (``sessions.jobs``). The
burst is the most due times falling in one whole second: what beat and the workers would meet
at once. ``python -m bench quick --only jitter_burst`` (N is 100,000 in both profiles; a few
minutes, most of them the cron schedules' next times).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

from bench.context import BenchContext, Result
from hbgw.sessions import heartbeat as hb
from hbgw.sessions import jobs
from hbgw.sessions.grammar import CronSchedule, IntervalSchedule, Schedule
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.states import MissedPolicy

NAME = "jitter_burst"
HEARTBEATS = 100_000
SET_AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
SCHEDULES: dict[str, Schedule] = {
    "every_1h": IntervalSchedule(3600),
    "every_15m": IntervalSchedule(900),
    "cron_hourly": CronSchedule("@hourly"),
}
JOB_SCHEDULES: dict[str, Schedule] = {
    "cron_hourly": CronSchedule("@hourly"),
    "cron_top_of_hour": CronSchedule("0 * * * *"),
    "every_1h": IntervalSchedule(3600),
}


def burst(schedule: Schedule, count: int, *, exact: bool) -> dict[str, int]:
    """The largest number of due times in one second, and the seconds they spread over."""
    seconds: Counter[int] = Counter()
    for n in range(count):
        state = hb.set_heartbeat(
            None,
            schedule=schedule,
            schedule_text="",
            prompt="p",
            origin_chat="C",
            origin_thread=None,
            now=SET_AT,
            policy=Policy(exact=exact),
            jitter_seed=f"s{n:015x}",  # the shape of a session id
        )
        due = state.next_due()
        assert due is not None
        seconds[int(due.timestamp())] += 1
    return _spread(seconds)


def job_burst(schedule: Schedule, count: int, *, exact: bool) -> dict[str, int]:
    """As ``burst``, for cron jobs added at ``SET_AT``: jittered by their ids unless exact."""
    seconds: Counter[int] = Counter()
    added = jobs.new_job(
        schedule=schedule, prompt="p", times=None, missed_policy=MissedPolicy.COALESCE, now=SET_AT
    )
    for n in range(count):
        # The shape of a job id (``job_records``); "" is how an exact job is stored.
        state = replace(added, jitter_seed="" if exact else f"j{n:011x}")
        due = state.next_due()
        assert due is not None
        seconds[int(due.timestamp())] += 1
    return _spread(seconds)


def _spread(seconds: Counter[int]) -> dict[str, int]:
    return {"largest_burst": max(seconds.values()), "distinct_seconds": len(seconds)}


def measure(count: int) -> Result:
    out: Result = {"heartbeats": count, "set_at": SET_AT.isoformat()}
    for label, schedule in SCHEDULES.items():
        out[label] = {
            "exact": burst(schedule, count, exact=True),
            "jitter": burst(schedule, count, exact=False),
        }
    out["jobs"] = {
        label: {
            "exact": job_burst(schedule, count, exact=True),
            "jitter": job_burst(schedule, count, exact=False),
        }
        for label, schedule in JOB_SCHEDULES.items()
    }
    return out


def run(ctx: BenchContext) -> Result:
    return measure(HEARTBEATS)


if __name__ == "__main__":
    import json

    print(json.dumps(measure(HEARTBEATS), indent=2))
