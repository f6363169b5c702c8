"""The checks added with issue 18 (run with the others from chaos/checks.py's ``ALL_CHECKS``):
cron jobs and heartbeat policies.

- ``one_run_per_due_time``: no due time of a heartbeat or a cron job reached the agent twice —
  neither under one fire id nor under two. A reservation re-anchors at its own time, so two
  runs that reached the agent are reserved at least one period apart — and, since a cron job's
  times are fixed (a late run, then the next on time), their fire ids also name due times
  less than half a period apart when they served one. (Not the due times the
  fire ids name: an id is the due index's score when the fire was sent, which a back-off after
  a refusal or a fire delivered late makes earlier than the due time the run serves.) A run the
  retry ladder gave back (``model unreachable``) is not counted.
- ``no_fire_outside_active_hours``: a heartbeat's fires are due (or at least reserved) inside
  its active hours.
- ``jitter_applied``: a jittered heartbeat's first fire is reserved no earlier than its set
  time plus its interval plus its session's offset (``sessions.jitter``); a jittered job's
  first run likewise, after its first due time with its id's offset (``sessions.jobs``), and
  the due time its fire id names is no earlier either (a cron job at the top of the hour
  fires at the hour plus its offset, never at the hour).

A job into a session never overlapping that session's heartbeat or user turns is
``no_overlapping_turns``: a job's runs are in the ledger under the session they ran in.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from chaos.evidence import REACHED_AGENT, Evidence, Run, inside_hours
from chaos.verdict import Check
from hbgw.sessions.jitter import jitter_offset

TOLERANCE = 0.01  # seconds: a fire id's due time is in whole milliseconds
RETRIED = "model unreachable"


def due_time(fire_id: str) -> float | None:
    """Epoch seconds of the due time a fire id names (``sid:ms``, ``job:id:ms``)."""
    _, _, due = fire_id.rpartition(":")
    return int(due) / 1000 if due.isdigit() else None


def _same_slot(first: str, second: str, period: float) -> bool:
    """Whether two fire ids can serve one due time: their due times closer than half a period.
    A cron job's times are fixed, so a late run and the next on time are reserved less than a
    period apart while their ids lie a period apart; an id moved by a refusal's back-off (a
    second or so) stays well inside half a period."""
    a, b = due_time(first), due_time(second)
    return a is None or b is None or abs(b - a) < period / 2


def _counted(r: Run) -> bool:
    return r.state in REACHED_AGENT and not (r.detail or "").startswith(RETRIED)


def _schedules(ev: Evidence) -> dict[str, tuple[float, list[Run]]]:
    """Each heartbeat's and each job's (period, runs that reached the agent), by a name."""
    periods = {f"heartbeat of {h.session}": h.interval for h in ev.heartbeats}
    periods.update({f"job {j.id}": j.period for j in ev.jobs})
    runs: dict[str, list[Run]] = defaultdict(list)
    for r in ev.runs:
        if _counted(r):
            runs[f"job {r.job}" if r.job else f"heartbeat of {r.session}"].append(r)
    return {name: (periods.get(name, 0.0), found) for name, found in runs.items()}


def one_run_per_due_time(ev: Evidence) -> Check:
    check = Check("one_run_per_due_time")
    fixed = {f"job {j.id}" for j in ev.jobs if j.fixed}
    for name, (period, runs) in _schedules(ev).items():
        reserved = sorted((r.reserved, r.fire_id) for r in runs)
        for (before, first), (after, second) in pairwise(reserved):
            close = after - before < period - TOLERANCE
            if close and (name not in fixed or _same_slot(first, second, period)):
                check.failures.append(
                    f"{name} (every {period:g}s): {second} was reserved {after - before:.3f}s "
                    f"after {first} — one due time ran twice"
                )
    check.figures["jobs"] = len(ev.jobs)
    check.figures["job_runs"] = sum(1 for r in ev.runs if r.job and _counted(r))
    return check


def no_fire_outside_hours(ev: Evidence) -> Check:
    check = Check("no_fire_outside_active_hours")
    windows = {h.session: h.hours for h in ev.heartbeats if h.hours}
    for r in ev.runs:
        hours = windows.get(r.session)
        due = due_time(r.fire_id)
        if r.job or hours is None or due is None or r.state not in REACHED_AGENT:
            continue
        if not inside_hours(hours, due) and not inside_hours(hours, r.reserved):
            check.failures.append(f"{r.fire_id} is due outside its active hours {hours}")
    check.figures["with_active_hours"] = len(windows)
    return check


def jitter_applied(ev: Evidence) -> Check:
    check = Check("jitter_applied")
    firsts: dict[str, float] = {}
    for r in ev.runs:
        if r.job is None and r.state in REACHED_AGENT:
            firsts[r.session] = min(r.reserved, firsts.get(r.session, r.reserved))
    jittered = [h for h in ev.heartbeats if h.jittered and h.session in firsts]
    for hb in jittered:
        offset = jitter_offset(hb.session, hb.interval).total_seconds()
        earliest = hb.set_at + hb.interval + offset
        if firsts[hb.session] < earliest - TOLERANCE:
            check.failures.append(
                f"{hb.session} (every {hb.interval:g}s, offset {offset:g}s) first fired "
                f"{earliest - firsts[hb.session]:.2f}s before its staggered due time"
            )
    check.figures["jittered_heartbeats"] = len(jittered)
    check.figures["jittered_with_an_offset"] = sum(
        1 for h in jittered if jitter_offset(h.session, h.interval)
    )
    _jobs_jitter(ev, check)
    return check


def _jobs_jitter(ev: Evidence, check: Check) -> None:
    firsts: dict[str, Run] = {}
    for r in ev.runs:
        if (
            r.job is not None
            and _counted(r)
            and (r.job not in firsts or r.reserved < firsts[r.job].reserved)
        ):
            firsts[r.job] = r
    jittered = [j for j in ev.jobs if j.first_due is not None and j.id in firsts]
    for job in jittered:
        assert job.first_due is not None
        run = firsts[job.id]
        due = due_time(run.fire_id)
        early = max(job.first_due - run.reserved, job.first_due - (due or job.first_due))
        if early > TOLERANCE:
            check.failures.append(
                f"job {job.id} (offset {job.offset:g}s) first ran {run.fire_id} {early:.2f}s "
                "before its staggered due time"
            )
    check.figures["jittered_jobs"] = len(jittered)
    check.figures["jittered_jobs_with_an_offset"] = sum(1 for j in jittered if j.offset)
