"""Admission: what to do with a fire or a drain request before any turn runs.

Fire: dedupe → load → (unknown, inactive or not due: settle the index, stop) → owner? (else
forward) → accepted. A task's fires are admitted together: one SQL read for the batch
(``admit_fires``), one read of the live workers, one forward per other owner.
Drain: owner? → estop? → accepted. An accepted request goes to ``start``,
which queues it for a turn thread; only that thread takes the lock (``take_lock``), so a lock
is never held, unrenewed, by a request still waiting for a thread (its lease would run out
before the turn begins). Busy there: the fire waits as the session's pending fire, a drain is
left to the holder, which drains before it lets go.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from hbgw.core.clock import to_ms
from hbgw.sessions.states import SessionStatus, fire_id, job_of_member
from hbgw.sessions.store import Ledger, SessionRecords
from hbgw.sessions.store.fire_turns import FireAdmission
from hbgw.state.dispatch import Dispatcher
from hbgw.state.due_settle import DueSettle
from hbgw.state.ownership import Rendezvous
from hbgw.state.turn_gate import Began
from hbgw.workers.heartbeat_turn import Fire, is_active, settle_duplicate
from hbgw.workers.job_admission import JobFire, JobFires
from hbgw.workers.locks import Grant
from hbgw.workers.logfields import fields, log, report
from hbgw.workers.turn_redis import LockReads, begin_fire, begin_job, drain_check

Start = Callable[[str, Fire | None], None]


@dataclass(frozen=True)
class _Admitted:
    """One fire of a batch as requested, with what the batch read found for it."""

    session_id: str
    due_ms: int
    fire_id: str
    seen: FireAdmission | None
    deferred: bool


ESTOP = "estop"  # what a drain held by the emergency stop answers


class Admission:
    def __init__(
        self,
        ledger: Ledger,
        sessions: SessionRecords,
        due: DueSettle,
        reads: LockReads,
        dispatcher: Dispatcher,
        jobs: JobFires,
        *,
        worker: str,
        lease_ms: int,
        start: Start,
    ) -> None:
        """``sessions``: where a drain of a compressed session goes; ``reads``: the gate, the
        live workers and the shared clock, read with the lock; ``jobs``: the cron jobs'
        admission, for a batch that holds their fires."""
        self.ledger = ledger
        self.sessions = sessions
        self.due = due
        self.reads = reads
        self.dispatcher = dispatcher
        self.jobs = jobs
        self.worker = worker
        self.lease_ms = lease_ms
        self.start = start
        self.held: set[str] = set()  # sessions whose drain the emergency stop holds

    def fire(self, session_id: str, due_ms: int, *, deferred: bool = False) -> str:
        [outcome] = self.fires([(session_id, due_ms)], deferred=deferred)
        return outcome

    def fires(self, batch: Sequence[tuple[str, int]], *, deferred: bool = False) -> list[str]:
        """One outcome per fire; one that fails does not stop the rest (it comes back after
        the claim lease). What every fire needs is read once: a failure there fails them all."""
        if any(job_of_member(member) for member, _ in batch):
            return self._with_jobs(batch, deferred)
        ids = [fire_id(sid, due_ms) for sid, due_ms in batch]
        try:
            pairs = [(sid, fid) for (sid, _), fid in zip(batch, ids, strict=True)]
            seen = self.ledger.admit_fires(pairs)
            now = self.reads.clock()
            owners = Rendezvous(self.reads.registry.live(to_ms(now)))
        except RuntimeError:
            raise  # shutting down: the task fails, the fires come back after the claim lease
        except Exception as exc:
            for (sid, _), fid in zip(batch, ids, strict=True):
                report("fire not accepted", exc, "fire.error", sid, fid)
            return ["error"] * len(batch)
        forward: dict[str, list[int]] = defaultdict(list)  # owner → positions in the batch
        outcomes = []
        for n, ((sid, due_ms), fid, one) in enumerate(zip(batch, ids, seen, strict=True)):
            fire = _Admitted(sid, due_ms, fid, one, deferred)
            outcome = self._one(fire, now, owners)
            if outcome.startswith("forward:"):
                forward[outcome.removeprefix("forward:")].append(n)
                outcome = "forwarded"
            outcomes.append(outcome)
        for owner, positions in forward.items():
            try:
                self.dispatcher.fires(owner, [batch[n] for n in positions])
            except Exception as exc:
                # Not forwarded: the fire stays claimed in the index and comes back after the
                # claim lease; the outcome says so instead of "forwarded".
                for n in positions:
                    report("fire not forwarded", exc, "fire.error", batch[n][0], ids[n])
                    outcomes[n] = "error"
        return outcomes

    def _with_jobs(self, batch: Sequence[tuple[str, int]], deferred: bool) -> list[str]:
        """A batch with cron jobs' members: each kind admitted apart, the outcomes in order."""
        kinds = [job_of_member(member) is not None for member, _ in batch]
        jobs = iter(
            self.jobs.fires([f for f, j in zip(batch, kinds, strict=True) if j], deferred=deferred)
        )
        rest = [f for f, j in zip(batch, kinds, strict=True) if not j]
        others = iter(self.fires(rest, deferred=deferred) if rest else [])
        return [next(jobs) if j else next(others) for j in kinds]

    def _one(
        self,
        fire: _Admitted,
        now: datetime,
        owners: Rendezvous,
    ) -> str:
        try:
            outcome = self._admit(fire, now, owners)
        except RuntimeError:
            raise
        except Exception as exc:
            report("fire not accepted", exc, "fire.error", fire.session_id, fire.fire_id)
            return "error"
        event = "forwarded" if outcome.startswith("forward:") else outcome
        log.debug(
            "fire %s: %s",
            fire.fire_id,
            outcome,
            extra=fields(f"fire.{event}", fire.session_id, fire.fire_id),
        )
        return outcome

    def _admit(
        self,
        fire: _Admitted,
        now: datetime,
        owners: Rendezvous,
    ) -> str:
        """The fire's outcome; ``forward:<worker>`` when another live worker owns its session
        (``fires`` sends those in one message per owner), ``no-owner`` when no worker is live
        (the fire comes back after the claim lease)."""
        due, seen = self.due, fire.seen
        if seen is None:
            due.index.remove(fire.session_id)
            return "unknown-session"
        session = seen.session
        sid = session.id
        if sid != fire.session_id:
            due.index.remove(fire.session_id)  # compressed: the child carries the heartbeat now
        if session.status != SessionStatus.ACTIVE:
            due.index.remove(sid)
            return "inactive-session"
        if seen.existing is not None:
            settle_duplicate(due, self.reads.clock, sid, seen.existing, seen.next_due)
            return "duplicate"
        state = seen.state
        if state is None or not is_active(state):
            due.index.remove(sid)
            return "inactive"
        if not state.is_due(now):
            due.apply(sid, seen.next_due)
            return "not-due"
        owner = owners.owner(sid)
        if owner is None:
            return "no-owner"
        if owner != self.worker:
            return f"forward:{owner}"
        self.start(sid, Fire(session, fire.fire_id, fire.due_ms, fire.deferred))
        return "accepted"

    def drain(self, session_id: str) -> str:
        """A user message was queued: run the inbox under the lock if nobody else is."""
        reads = self.reads
        # Messages queued before a compression are answered in the conversation they were
        # sent to; new ones go to the session that continues it. Backlog, owner and stop are
        # read in one round trip; a session with nothing queued reads the two again for the
        # session that continues it (rare: a drain is asked for queued messages).
        seen = drain_check(reads, session_id)
        sid = session_id
        if not seen.backlog:
            sid = self.sessions.resolve_active(session_id).id
            seen = seen if sid == session_id else drain_check(reads, sid)
        owner = seen.owner
        if owner != self.worker:
            if owner is not None:
                self.dispatcher.drain(owner, sid)
            return "forwarded"
        if seen.estop:
            # Messages wait in the inbox; beat's sweeper asks again about once a second, so
            # this is said once per stop and session, not at every ask.
            if sid not in self.held:
                self.held.add(sid)
                log.info(
                    "drain held by the emergency stop; messages wait until it is lifted",
                    extra=fields("drain.estop", sid),
                )
            return ESTOP
        self.held.discard(sid)
        self.start(sid, None)
        return "accepted"

    def take_lock(self, sid: str, fire: Fire | None) -> Grant | None:
        """On the turn thread, as the turn begins: the lock, or None when the session is busy."""
        token = uuid.uuid4().hex
        if fire is None:
            # The lock and the drain's first step (a message taken) in one round trip.
            begun = self.reads.gate.try_begin_drain(sid, token, self.lease_ms)
            # Busy: the lock holder drains the inbox before it lets go.
            if not isinstance(begun, Began):
                return None
            return Grant(sid, token, begun.fence, begun.first)
        # The lock, and the emergency stop and owner read with it, in one round trip.
        if isinstance(fire, JobFire):
            begun, seen = begin_job(
                self.reads, sid, fire.member, fire.fire_id, token, self.lease_ms
            )
        else:
            begun, seen = begin_fire(self.reads, sid, fire.fire_id, token, self.lease_ms)
        if not isinstance(begun, Began):
            log.info("fire pending", extra=fields("fire.pending", sid, fire.fire_id))
            return None
        return Grant(sid, token, begun.fence, seen=seen)
