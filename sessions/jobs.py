"""The cron-job state machine. Pure: every function takes ``now`` and returns a new state.

A job is the heartbeat's rules applied to a standalone prompt: due when active and now ≥ its
next due time (``anchor`` + interval, the first cron time after the anchor, or a one-shot's
time); a reservation counts the run and re-anchors at the fire time, so any number of missed
due times give one run (``MissedPolicy.COALESCE``) — or none (``SKIP``); a refund puts both
back. A job with a repeat count (a one-shot has 1) completes when its last run finishes.

Jitter as for heartbeats (``sessions.jitter``): a repeating job not marked ``exact`` is offset
by a fixed fraction of its period drawn from its id — an interval once per phase (the first
due time after an add, a resume or a skip), a cron schedule at every occurrence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from hbgw.core.errors import InvalidState
from hbgw.sessions.grammar import CronSchedule, IntervalSchedule
from hbgw.sessions.grammar.job_schedule import JobSchedule, OnceSchedule, job_next_fire
from hbgw.sessions.jitter import jitter_offset
from hbgw.sessions.states import JobStatus, MissedPolicy

MAX_MISSED_COUNTED = 1000
MAX_TIMES = 1_000_000  # a repeat count beyond it is "forever": leave --times out


@dataclass(frozen=True)
class JobState:
    prompt: str
    schedule: JobSchedule
    status: JobStatus
    anchor: datetime
    fire_count: int
    times: int | None
    generation: int
    missed_policy: MissedPolicy = MissedPolicy.COALESCE
    last_fired: datetime | None = None
    retries: int = 0
    """Attempts of the retry ladder so far (a run whose model was unreachable, given back)."""
    retry_at: datetime | None = None
    """When that run is tried again: the next due time while it is set."""
    jitter_seed: str = ""
    """The job id its jitter offset is drawn from ("": exact times)."""

    def next_due(self) -> datetime | None:
        if self.status != JobStatus.ACTIVE or self.runs_left() == 0:
            return None
        if self.retry_at is not None:
            return self.retry_at
        due = job_next_fire(self.schedule, self.anchor, self.fire_count)
        # An interval keeps the phase of its first run: the offset is added once, to a due
        # time counted from an add, resume or skip (the anchor then is not a fire time).
        if due is not None and (
            isinstance(self.schedule, CronSchedule) or self.anchor != self.last_fired
        ):
            due += self.offset()
        return due

    def offset(self) -> timedelta:
        """The jitter offset of this job's schedule (0: exact, or a one-shot)."""
        schedule = self.schedule
        if not self.jitter_seed or isinstance(schedule, OnceSchedule):
            return timedelta(0)
        if isinstance(schedule, IntervalSchedule):
            return jitter_offset(self.jitter_seed, float(schedule.seconds))
        first = job_next_fire(schedule, self.anchor, 0)
        following = job_next_fire(schedule, first, 0) if first is not None else None
        if first is None or following is None:
            return timedelta(0)
        return jitter_offset(self.jitter_seed, (following - first).total_seconds())

    def runs_left(self) -> int | None:
        return None if self.times is None else max(0, self.times - self.fire_count)

    def is_due(self, now: datetime) -> bool:
        due = self.next_due()
        return due is not None and now >= due

    def missed(self, now: datetime) -> int:
        """Due times that passed besides the one a run now would serve (a metric, capped)."""
        due = self.next_due()
        if due is None or now < due or isinstance(self.schedule, OnceSchedule):
            return 0
        count, moment = 0, due
        while count < MAX_MISSED_COUNTED:
            following = job_next_fire(self.schedule, moment, self.fire_count)
            if following is None or following > now:
                break
            count, moment = count + 1, following
        return count


def new_job(
    *,
    schedule: JobSchedule,
    prompt: str,
    times: int | None,
    missed_policy: MissedPolicy,
    now: datetime,
) -> JobState:
    if isinstance(schedule, OnceSchedule):
        times = 1  # a one-shot runs once, whatever was asked
    if times is not None and not 1 <= times <= MAX_TIMES:
        raise InvalidState(f"--times must be between 1 and {MAX_TIMES}, not {times}.")
    return JobState(
        prompt=prompt,
        schedule=schedule,
        status=JobStatus.ACTIVE,
        anchor=now,
        fire_count=0,
        times=times,
        generation=1,
        missed_policy=missed_policy,
    )


def _refuse_ended(state: JobState, job_id: str, verb: str) -> None:
    if state.status == JobStatus.CANCELLED:
        raise InvalidState(f"Job {job_id} is already cancelled; there is nothing to {verb}.")
    if state.status == JobStatus.COMPLETED:
        raise InvalidState(f"Job {job_id} has already completed; there is nothing to {verb}.")


def pause(state: JobState, job_id: str, now: datetime) -> JobState:
    _refuse_ended(state, job_id, "pause")
    if state.status == JobStatus.PAUSED:
        raise InvalidState(f"Job {job_id} is already paused — resume it to run it again.")
    return replace(state, status=JobStatus.PAUSED, generation=state.generation + 1)


def resume(state: JobState, job_id: str, now: datetime) -> JobState:
    """Active again, re-anchored now: no catch-up run for what was missed while paused (a
    one-shot whose time has passed runs at once)."""
    _refuse_ended(state, job_id, "resume")
    if state.status == JobStatus.ACTIVE:
        raise InvalidState(f"Job {job_id} is already active.")
    return replace(
        state,
        status=JobStatus.ACTIVE,
        anchor=now,
        generation=state.generation + 1,
        retries=0,
        retry_at=None,
    )


def cancel(state: JobState, job_id: str, now: datetime) -> JobState:
    if state.status == JobStatus.CANCELLED:
        raise InvalidState(f"Job {job_id} is already cancelled.")
    if state.status == JobStatus.COMPLETED:
        raise InvalidState(f"Job {job_id} has already completed; there is nothing to cancel.")
    return replace(state, status=JobStatus.CANCELLED, generation=state.generation + 1)


def reserve(state: JobState, now: datetime) -> JobState:
    """One run, however late: the count goes up once and the anchor moves to the fire time (a
    retry's too: the ladder's count stays until the run ends for good)."""
    return replace(
        state, fire_count=state.fire_count + 1, anchor=now, last_fired=now, retry_at=None
    )


def refund(state: JobState, *, prev_anchor: datetime, prev_last_fired: datetime | None) -> JobState:
    return replace(
        state,
        fire_count=max(0, state.fire_count - 1),
        anchor=prev_anchor,
        last_fired=prev_last_fired,
    )


def retry(
    state: JobState,
    *,
    prev_anchor: datetime,
    prev_last_fired: datetime | None,
    retry_at: datetime,
) -> JobState:
    """The run's model was unreachable: the run is given back (as a refund) and due again at
    ``retry_at``, one rung further up the ladder."""
    given_back = refund(state, prev_anchor=prev_anchor, prev_last_fired=prev_last_fired)
    return replace(given_back, retries=state.retries + 1, retry_at=retry_at)


def skip_missed(state: JobState, now: datetime) -> JobState:
    """``SKIP``: what was missed never runs (a run waiting on the retry ladder neither); the
    schedule goes on from now."""
    return replace(state, anchor=now, retries=0, retry_at=None)


def finished(state: JobState) -> JobState:
    """After a run finished for good (the ladder, if any, is over): completed when no run is
    left (a one-shot, the last of --times)."""
    state = replace(state, retries=0, retry_at=None)
    if state.status == JobStatus.ACTIVE and state.runs_left() == 0:
        return replace(state, status=JobStatus.COMPLETED)
    return state
