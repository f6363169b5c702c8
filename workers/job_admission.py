"""Admission of cron jobs' fires: the heartbeat's admission (``admission.py``) for a member
``job:<id>`` of the due index.

dedupe → load → (unknown, inactive or not due: settle the index, stop) → missed and ``skip``:
move on without a run → the target session (the job's own, compression followed; or the run's
fresh one) → owner of that session? (else forward) → accepted. Whether the session is idle is
not asked here: the lock decides, on the turn thread (``turn_redis.begin_job``), and a busy
session keeps the fire pending as the job's own, beside its heartbeat's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from hbgw.core.clock import Clock, to_ms
from hbgw.sessions.states import JobStatus, MissedPolicy, SessionStatus, fire_id, job_of_member
from hbgw.sessions.store import Jobs
from hbgw.sessions.views import JobAdmission, SessionView
from hbgw.state.dispatch import Dispatcher
from hbgw.state.due_settle import DueSettle
from hbgw.state.ownership import Rendezvous, WorkerRegistry
from hbgw.workers.heartbeat_turn import Fire, settle_duplicate
from hbgw.workers.logfields import fields, log, report


@dataclass(frozen=True)
class JobFire(Fire):
    """An admitted fire of a cron job, in the session it runs in."""

    job_id: str = ""
    member: str = ""


Start = Callable[[str, Fire | None], None]


class JobFires:
    def __init__(
        self,
        jobs: Jobs,
        due: DueSettle,
        registry: WorkerRegistry,
        dispatcher: Dispatcher,
        *,
        clock: Clock,
        worker: str,
        start: Start,
    ) -> None:
        """``registry``: the live workers, who owns a job's session; ``worker``: this one."""
        self.jobs = jobs
        self.due = due
        self.registry = registry
        self.dispatcher = dispatcher
        self.clock = clock
        self.worker = worker
        self.start = start

    def fires(self, batch: Sequence[tuple[str, int]], *, deferred: bool = False) -> list[str]:
        """One outcome per fire of ``batch`` ((member, due ms) pairs of jobs)."""
        ids = [fire_id(member, due_ms) for member, due_ms in batch]
        try:
            jobs = [(job_of_member(m) or "", fid) for (m, _), fid in zip(batch, ids, strict=True)]
            seen = self.jobs.admit_jobs(jobs)
            now = self.clock()
            owners = Rendezvous(self.registry.live(to_ms(now)))
        except RuntimeError:
            raise
        except Exception as exc:
            for (member, _), fid in zip(batch, ids, strict=True):
                report("job fire not accepted", exc, "job.error", member, fid)
            return ["error"] * len(batch)
        outcomes = []
        for (member, due_ms), fid, one in zip(batch, ids, seen, strict=True):
            try:
                outcome = self._admit(member, due_ms, fid, one, now, owners, deferred)
            except RuntimeError:
                raise
            except Exception as exc:
                report("job fire not accepted", exc, "job.error", member, fid)
                outcome = "error"
            log.debug("job fire %s: %s", fid, outcome, extra=fields(f"job.{outcome}", member, fid))
            outcomes.append(outcome)
        return outcomes

    def _admit(
        self,
        member: str,
        due_ms: int,
        fid: str,
        seen: JobAdmission | None,
        now: datetime,
        owners: Rendezvous,
        deferred: bool,
    ) -> str:
        due = self.due
        if seen is None:
            due.index.remove(member)
            return "unknown-job"
        job = seen.job
        if seen.existing is not None:
            settle_duplicate(due, self.clock, member, seen.existing, job.next_due)
            return "duplicate"
        if job.status != JobStatus.ACTIVE:
            due.index.remove(member)
            return "inactive"
        if not job.state.is_due(now):
            due.apply(member, job.next_due)
            return "not-due"
        if job.state.missed_policy == MissedPolicy.SKIP and job.state.missed(now) > 0:
            skipped = self.jobs.skip_missed_job(job.id, job.state.generation, now)
            due.apply(member, skipped.next_due)
            return "skipped"
        session = self._session(seen, fid, now)
        if session is None:
            due.index.remove(member)
            return "inactive-session"
        owner = owners.owner(session.id)
        if owner is None:
            return "no-owner"
        if owner != self.worker:
            self.dispatcher.fires(owner, [(member, due_ms)])
            return "forwarded"
        self.start(session.id, JobFire(session, fid, due_ms, deferred, job.id, member))
        return "accepted"

    def _session(self, seen: JobAdmission, fid: str, now: datetime) -> SessionView | None:
        """Where this run goes: the job's session, or the run's own fresh one (made by its
        begin); None (and the job paused, saying why) when the job's session can run nothing."""
        job = seen.job
        session = seen.target(fid, now)
        if session is not None and session.status == SessionStatus.ACTIVE:
            return session
        status = "gone" if session is None else session.status
        self.jobs.hold_job(job.id, f"paused: its session {job.route.session_id} is {status}", now)
        return None
