"""The restore pass: SQL is the truth; the due index and the session inboxes are rebuilt from it.

A pass (a *sweep*) is cut into steps, one per beat tick at most, each reading at most
``HBGW_RESTORE_PAGE`` rows from SQL: first the queued user messages (by id), then the active
heartbeats (by session id), then the active cron jobs (by job id). Where the sweep stands is
kept in Redis (``hbgw/state/restore_sweep.py``), so a beat that restarts continues it and replicas
share it; a short lease lets one replica at a time run a step. The cost of a tick does not grow
with the fleet: a large fleet's sweep spreads over several ticks.

* Regular sweeps start ``HBGW_RESTORE_INTERVAL`` after the previous one started, and their steps
  are spread over about one interval (as many as the last sweep took); a sweep that runs late
  takes one step every tick. They only correct what is missing or late.
* When the epoch is missing, Redis lost its data: the sweep is a rebuild, run at once, one step
  per tick with beat ticking again without a pause, and it also seeds every session's fence
  counter (idle is not stored: a free lock with nothing queued or in flight).

Only adds or corrects entries, never removes one: a failing store read is logged, the step is
given up, and it is tried again one interval later.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from hbgw.core.clock import to_ms
from hbgw.sessions.states import job_member
from hbgw.sessions.store import RestoreReads
from hbgw.sessions.store.job_records import JobRecords
from hbgw.sessions.views import JobRestoreEntry, RestoreEntry
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS
from hbgw.state.due_index import DueIndex
from hbgw.state.failures import log_failure
from hbgw.state.restore_sweep import Phase, RestoreSweep, SweepState
from hbgw.state.turn_gate import TurnGate

log = logging.getLogger("hbgw.restore")

K = TypeVar("K", int, str)
P = TypeVar("P")


@dataclass(frozen=True)
class StepReport:
    ran: bool = False  # this replica held the lease and read SQL
    ok: bool = True  # False: a store read failed (retried one interval later)
    rows: int = 0  # SQL rows read
    written: int = 0  # index entries written
    requeued: int = 0  # messages put back into inboxes
    started: bool = False  # this step began a sweep
    completed: bool = False  # this step ended one: the index is known complete
    rebuilding: bool = False  # a rebuild after Redis lost its data is under way


@dataclass
class _Progress:
    phase: Phase | None
    cursor: str
    budget: int
    rows: int = 0
    written: int = 0
    requeued: int = 0


@dataclass(frozen=True)
class RestoreConfig:
    page: int  # most rows per step
    interval_ms: int  # a regular sweep starts no earlier than this after the last one started
    slack_ms: int  # an entry this much later than the truth is left alone (a claim lease)
    lease_ms: int  # how long one step may hold the lease


class Restorer:
    def __init__(
        self,
        restore: RestoreReads,
        jobs: JobRecords,
        index: DueIndex,
        gate: TurnGate,
        sweep: RestoreSweep,
        cfg: RestoreConfig,
    ) -> None:
        # The store's parts this pass reads: the restore pages and the jobs' restore page.
        self.restore = restore
        self.jobs = jobs
        self.index = index
        self.gate = gate
        self.sweep = sweep
        self.cfg = cfg
        self.token = uuid.uuid4().hex
        # After a failed store read: this process waits one interval (the database is away).
        self.retry_at_ms = 0

    def step(
        self, now_ms: int, *, force: bool = False, state: SweepState | None = None
    ) -> StepReport:
        """One bounded step when one is due and no other replica runs one; ``force`` starts a
        sweep now and ignores the pacing (``run_sweep``); ``state``: the sweep's state as the
        caller just read it (beat's tick, with its registries), else read here."""
        if now_ms < self.retry_at_ms and not force:
            return StepReport()
        state = self.sweep.read() if state is None else state
        if not (force or self._due(state, now_ms)):
            return StepReport()
        if not self.sweep.acquire(self.token, self.cfg.lease_ms):
            return StepReport(rebuilding=state.lost)
        try:
            return self._step(state, now_ms)
        except BaseException:
            self._give_up_lease()
            raise

    def _give_up_lease(self) -> None:
        """A step that records nothing gives the lease up (when Redis is the failure, the lease
        ends with its PX)."""
        with contextlib.suppress(*TRANSIENT_REDIS_ERRORS):
            self.sweep.release(self.token)

    def run_sweep(self, now_ms: int) -> StepReport:
        """Finish the sweep under way, or run a whole new one, in this call (tests, tools).

        Returns the last step's report; stops early when a read fails or another replica
        holds the lease.
        """
        report = self.step(now_ms, force=True)
        while report.ran and report.ok and not report.completed:
            report = self.step(now_ms, force=True)
        return report

    def _due(self, state: SweepState, now_ms: int) -> bool:
        if state.lost:
            return True  # rebuild at once, step after step
        if state.phase is None:
            return now_ms >= state.next_ms
        elapsed = now_ms - state.started_ms
        if elapsed >= self.cfg.interval_ms:
            return True  # late: a step every tick
        # Spread over about one interval: as many steps by now as the last sweep's share.
        return state.steps < 1 + state.last_steps * elapsed / self.cfg.interval_ms

    def _step(self, state: SweepState, now_ms: int) -> StepReport:
        started = state.phase is None
        if started and state.lost:
            log.warning(
                "restore: no epoch in Redis (its data was lost, or this is a new deployment): "
                "rebuilding the due index, fences and inboxes from SQL",
                extra={"action": "restore.rebuild"},
            )
        progress = _Progress(
            state.phase or Phase.MESSAGES, "" if started else state.cursor, self.cfg.page
        )
        try:
            while progress.budget > 0 and progress.phase is not None:
                self._page(progress, now_ms, seed_all=state.lost)
        except _ReadFailed as failed:
            log_failure(
                log,
                "restore: store read failed; retrying next pass",
                failed.cause,
                action="restore.failed",
            )
            self.retry_at_ms = now_ms + self.cfg.interval_ms
            self._give_up_lease()
            return StepReport(ran=True, ok=False, rebuilding=state.lost)
        completed = progress.phase is None
        recorded = self._record(state, progress, now_ms)
        report = StepReport(
            ran=True,
            rows=progress.rows,
            written=progress.written,
            requeued=progress.requeued,
            started=started,
            completed=completed and recorded,
            rebuilding=state.lost and not (completed and recorded),
        )
        _log_step(report, recorded)
        return report

    def _record(self, state: SweepState, progress: _Progress, now_ms: int) -> bool:
        """Where the sweep stands after this step, or, when it is complete, the epoch and when
        the next may start; False when the lease lapsed (nothing recorded)."""
        started = now_ms if state.phase is None else state.started_ms
        steps = 1 if state.phase is None else state.steps + 1
        if progress.phase is None:
            done = {"epoch": started, "next": started + self.cfg.interval_ms, "last": steps}
            return self.sweep.commit(self.token, done, ("phase", "cursor", "started", "steps"))
        under_way = {
            "phase": progress.phase.value,
            "cursor": progress.cursor,
            "started": started,
            "steps": steps,
        }
        return self.sweep.commit(self.token, under_way)

    def _page(self, progress: _Progress, now_ms: int, *, seed_all: bool) -> None:
        limit = progress.budget
        if progress.phase is Phase.MESSAGES:
            queued = _read(self.restore.queued_page, int(progress.cursor or 0), limit)
            progress.requeued += restore_inboxes(self.gate, queued.by_session)
            rows, last, after = queued.rows, str(queued.last_id), Phase.HEARTBEATS
        elif progress.phase is Phase.HEARTBEATS:
            page = _read(self.restore.restorable_page, progress.cursor, limit)
            progress.written += self._restore_heartbeats(page.entries, now_ms, seed_all)
            rows, last, after = page.rows, page.last_session, Phase.JOBS
        else:
            jobs = _read(self.jobs.restorable_jobs_page, progress.cursor, limit)
            progress.written += self._restore_jobs(jobs.entries, now_ms)
            rows, last, after = jobs.rows, jobs.last_id, None
        progress.rows += rows
        progress.budget -= rows
        if rows < limit:
            progress.phase, progress.cursor = after, ""
        else:
            progress.cursor = last

    def _restore_heartbeats(self, entries: list[RestoreEntry], now_ms: int, seed_all: bool) -> int:
        """Write each entry's true due time when its index entry is missing, or later than the
        truth (or now, for an overdue heartbeat) by more than the slack: a claim lease or a
        refund back-off legitimately pushes an entry later.

        Fence counters are seeded for every session in a rebuild; otherwise only where
        the index entry was wrong, the sign that this session's keys may have been lost.
        """
        present = self.index.due_many([e.session_id for e in entries])
        wanted: dict[str, int] = {}
        for entry in entries:
            due = to_ms(entry.next_due_at)
            current = present.get(entry.session_id)
            if current is None or current > max(due, now_ms) + self.cfg.slack_ms:
                wanted[entry.session_id] = due
        if wanted:
            self.index.schedule_many(wanted)
        self.gate.seed_many(
            {e.session_id: e.fence for e in entries if seed_all or e.session_id in wanted}
        )
        return len(wanted)

    def _restore_jobs(self, entries: list[JobRestoreEntry], now_ms: int) -> int:
        """As ``_restore_heartbeats``, for cron jobs' members ``job:<id>`` (no fences: a job's
        run is fenced by the session it runs in)."""
        members = {job_member(e.job_id): to_ms(e.next_due_at) for e in entries}
        present = self.index.due_many(list(members))
        wanted = {
            member: due
            for member, due in members.items()
            if (current := present.get(member)) is None
            or current > max(due, now_ms) + self.cfg.slack_ms
        }
        if wanted:
            self.index.schedule_many(wanted)
        return len(wanted)


class _ReadFailed(Exception):
    """A store read of the restore pass failed (Redis failures are not this: they end the tick)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _read(read: Callable[[K, int], P], after: K, limit: int) -> P:
    try:
        return read(after, limit)
    except Exception as exc:
        raise _ReadFailed(exc) from exc


def restore_inboxes(gate: TurnGate, queued: dict[str, list[int]]) -> int:
    """Every queued message SQL holds that Redis lost goes back to its session's inbox.

    Redis may have been flushed, restarted without persistence, or unreachable when the
    message was accepted; SQL still has it ``queued``. Returns how many were put back.
    """
    added = gate.restore_inboxes(queued)
    for session_id, count in added.items():
        log.info(
            "restore: %d queued messages put back into the inbox",
            count,
            extra={"action": "restore.requeued", "session": session_id},
        )
    return sum(added.values())


def _log_step(report: StepReport, recorded: bool) -> None:
    if not recorded:
        log.info(
            "restore: the lease ended during a step; it will be done again",
            extra={"action": "restore.lease_lost"},
        )
    elif report.completed:
        log.info(
            "restore: pass complete; last step read %d rows, wrote %d, requeued %d messages",
            report.rows,
            report.written,
            report.requeued,
            extra={"action": "restore.done"},
        )
    elif report.written or report.requeued:
        log.info(
            "restore: step read %d rows, wrote %d, requeued %d messages",
            report.rows,
            report.written,
            report.requeued,
            extra={"action": "restore.step"},
        )
