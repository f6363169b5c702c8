"""The locked session loop: the one place that holds a session's lock, claims its fence in SQL
and decides what an error under the lock means.

Under a lock: the fire it was granted for (if any) — or, for a drain, the delivery retries
that are due (``workers/delivery_retry.py``) — then the queued user messages, then the
pending fire (handed back to admission), else the session goes idle. Each turn runs on the
turn skeleton (``workers/turn.py``), whose error policy covers a turn's own trouble (a failed
agent, a refused delivery, a lost lock mid-turn); this loop's covers what ends a turn.

Error policy, for everything that runs under the lock:

- ``TurnAborted`` (the lock is gone, or could not be confirmed): stop; drain nothing — that is
  the new holder's work now; give the lock back only if it is still this grant's.
- ``StaleFence`` (SQL knows a newer fence): stop writing; raise Redis' fence counter to SQL's,
  release the lock if it is still ours and ask for a new drain of any queued messages.
- anything else inside one turn: log it; the turn is over, the drain goes on, so queued user
  messages are answered at once (an unanswered message stays in flight and is retried on the
  next grant).
- anything else outside a turn (Redis or SQL down): log it and release the lock.

Expected trouble (Redis or the database away, a lost lock or fence) is one log line with the
action, session, fire id and cause; a traceback is logged only for the unexpected.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import redis

from hbgw.core.clock import Clock
from hbgw.core.errors import StaleFence, TurnAborted
from hbgw.core.metrics import count_delivery
from hbgw.sessions.states import DeliveryState, parse_fire_id
from hbgw.sessions.store import Ledger, SessionRecords
from hbgw.state.dispatch import Dispatcher
from hbgw.state.turn_gate import Kept, LockLost, NextMessage, Step, TurnEnded, TurnGate
from hbgw.workers.delivery_retry import RETRIES_PER_GRANT, DeliveryRetrier
from hbgw.workers.heartbeat_turn import Fire, HeartbeatTurn
from hbgw.workers.job_admission import JobFire
from hbgw.workers.job_turn import JobTurn
from hbgw.workers.locks import Grant, Lease, LockKeeper, LockRenewals
from hbgw.workers.logfields import fields, log, report
from hbgw.workers.turn_redis import log_after
from hbgw.workers.user_turn import UserTurn

OnPending = Callable[[str, int], object]


class SessionLoop:
    def __init__(
        self,
        gate: TurnGate,
        ledger: Ledger,
        sessions: SessionRecords,
        dispatcher: Dispatcher,
        *,
        clock: Clock,
        worker: str,
        heartbeat: HeartbeatTurn,
        user: UserTurn,
        job: JobTurn,
        lease_ms: int,
        renewals: LockRenewals,
        on_pending: OnPending,
        retrier: DeliveryRetrier,
    ) -> None:
        """``ledger``: a drain's fence claim and the fence resync; ``sessions``: the platform
        a claim's unknown deliveries are counted under; ``worker``: this one, the resync's
        drain goes to it."""
        self.gate = gate
        self.ledger = ledger
        self.sessions = sessions
        self.dispatcher = dispatcher
        self.clock = clock
        self.worker = worker
        self.heartbeat = heartbeat
        self.user = user
        self.job = job
        self.lease_ms = lease_ms
        self.renewals = renewals
        self.on_pending = on_pending
        self.retrier = retrier

    def run(self, grant: Grant, fire: Fire | None = None) -> None:
        sid, fire_id = grant.session_id, fire.fire_id if fire else None
        with LockKeeper(
            self.gate, sid, grant.token, self.lease_ms, renewals=self.renewals
        ) as keeper:
            lease = Lease(grant, keeper)
            try:
                # Claimed before anything runs under the lock: every write of this grant (the
                # reservation included) is then fenced, whatever comes first. A fire's claim,
                # reservation, re-check and start are one transaction (a cron job's too).
                if fire is None:
                    if not isinstance(grant.first, NextMessage | Kept):
                        return  # stopped as it began: the lock is given back, messages wait
                    self._claim_drain(lease)
                elif isinstance(fire, JobFire):
                    # A cron job's run: the same one-transaction begin, fence and error policy
                    # as a heartbeat's.
                    if (job_begun := self.job.begin(lease, fire)) is not None:
                        run_job = functools.partial(self.job.run, lease, job_begun)
                        self._attempt(lease, "job", run_job, fire_id)
                elif (begun := self.heartbeat.begin(lease, fire)) is not None:
                    run_fire = functools.partial(self.heartbeat.run, lease, begun)
                    self._attempt(lease, "heartbeat", run_fire, fire_id)
                self._drain(lease)
            except TurnAborted as exc:
                log.warning("turn aborted: %s", exc, extra=fields("turn.aborted", sid, fire_id))
                # A turn that could not confirm its lock may still hold it: given back now, the
                # sweeper hands the session on at once, not a lease later. The token check
                # leaves a lock that moved on to its new holder.
                with contextlib.suppress(redis.RedisError):
                    self.gate.release(sid, grant.token)
            except StaleFence as exc:
                log.warning("stale fence: %s", exc, extra=fields("turn.stale_fence", sid, fire_id))
                self._resync(grant, fire)
            except Exception as exc:
                report("session loop failed", exc, "turn.crashed", sid, fire_id)
                with contextlib.suppress(redis.RedisError):
                    self.gate.release(sid, grant.token)

    def _claim_drain(self, lease: Lease) -> None:
        """A drain's grant: claim the fence, then send the delivery retries now due, first
        (a drain is what beat asks for when one is due; fires never wait for them)."""
        sid = lease.session_id
        claim = self.ledger.claim_fence(sid, lease.fence, self.clock(), retries=RETRIES_PER_GRANT)
        if claim.unknown:  # rare: the platform of the session, for the metric's label
            label = self.user.io.label(self.sessions.get_session(sid).platform)
            count_delivery(label, DeliveryState.UNKNOWN.value, claim.unknown)
        for record in claim.retries:
            retry = functools.partial(self.retrier.retry, lease, record)
            self._attempt(lease, "delivery", retry)

    def _attempt(
        self, lease: Lease, action: str, work: Callable[[], None], fire_id: str | None = None
    ) -> bool:
        """Run one turn; True when it completed. Lock and fence trouble ends the whole loop."""
        try:
            work()
        except (TurnAborted, StaleFence):
            raise
        except Exception as exc:
            if lease.keeper.lost.is_set():
                raise TurnAborted(f"Lost the lock of session {lease.session_id}.") from exc
            what = f"{action} turn failed; the session goes on"
            report(what, exc, f"{action}.failed", lease.session_id, fire_id)
            return False
        return True

    def _drain(self, lease: Lease) -> None:
        """User messages first; then the pending fire; else the session goes idle. Each step is
        one round trip (``TurnGate.next_step``): what the last turn left for Redis, the ack of
        the message it answered, the emergency stop and the next message or the end."""
        sid, first = lease.session_id, lease.grant.first
        step: Step | None = None if isinstance(first, Kept) else first
        answered: str | None = None
        while True:
            if step is None:
                step = self._next_step(lease, answered)
            answered = None
            if isinstance(step, NextMessage):
                answer = functools.partial(self.user.run, lease, int(step.message_id))
                if self._attempt(lease, "user", answer):
                    answered = step.message_id  # acknowledged with the next step's round trip
                step = None
                continue
            if isinstance(step, LockLost):
                log.warning("lock lost at the end of a turn", extra=fields("turn.lock_lost", sid))
            elif isinstance(step, TurnEnded) and step.pending_fire:
                pending_sid, due_ms = parse_fire_id(step.pending_fire)
                self.on_pending(pending_sid, due_ms)
            # Stopped: the messages wait in the inbox; the sweeper asks again after the stop.
            return

    def _next_step(self, lease: Lease, answered: str | None) -> Step:
        """The lock still ours (in memory), then the step; a lock lost meanwhile still sends
        what the last turn left and acknowledges its answer (as it always did)."""
        gate, sid = self.gate, lease.session_id
        try:
            lease.keeper.check()
        except TurnAborted:
            self._leave(lease, answered)
            raise
        step, errors = gate.next_step(
            sid, lease.grant.token, self.lease_ms, ack=answered, first=lease.take_after()
        )
        log_after(sid, errors)
        return step

    def _leave(self, lease: Lease, answered: str | None) -> None:
        """The lock is gone: what the finished turn left (its due time above all) and the ack
        of its answer still go to Redis, best effort, in one round trip."""
        after = lease.take_after()
        if after is None and answered is None:
            return
        with contextlib.suppress(redis.RedisError):
            log_after(lease.session_id, self.gate.leave(lease.session_id, answered, after))

    def _resync(self, grant: Grant, fire: Fire | None) -> None:
        """Redis lost its fence counter (evicted, or Redis lost its data) or the lock moved on:
        raise the counter to SQL's highest fence (never lower, never from zero), start over.
        The fire this grant was for is admitted again at once: left alone it waited for its
        claim lease (a minute), and an evicted fence made heartbeats that late (issue 29).
        Its fire id is UNIQUE, so a fire that did start meanwhile is a duplicate, not a repeat."""
        gate, sid = self.gate, grant.session_id
        try:
            gate.seed(sid, self.ledger.max_fence(sid))
            gate.release(sid, grant.token)
            if gate.backlog(sid):
                self.dispatcher.drain(self.worker, sid)
            if fire is not None:
                member = fire.member if isinstance(fire, JobFire) else sid
                self.on_pending(member, fire.due_ms)
        except Exception as exc:
            report("fence resync failed", exc, "turn.resync_failed", sid)
