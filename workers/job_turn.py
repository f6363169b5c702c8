"""One cron job's run under a held session lock, on the turn skeleton (``workers/turn.py``).

Step for step a heartbeat turn (``heartbeat_turn.py``), with the job's row where the heartbeat's
was: the lock, with the emergency stop and the owner read in its round trip
(``turn_redis.begin_job``) → one SQL transaction (``begin_job_fire``): claim the fence, reserve
(the job active and due, the session active), re-check (the session not reset since admission,
then what Redis read) and either give the reservation back at once or start it with the prompt
stored → agent → fenced mark with the delivery record ``pending`` → deliver to the session's
chat and thread as a new message, quietly (no typing or progress) → finish, fenced, with the
reply, the tokens and the delivery's outcome; the job completes there when that was its last
run. The job's next due time goes to the index under ``job:<id>``, with the drain's next step.

A run whose model was unreachable (``TurnFailed.unreachable``) climbs the retry ladder
(``HBGW_JOB_RETRY_DELAYS``): recorded failed with nothing sent to the chat, its reservation given
back and the job due again after the rung's delay — a new fire, with its own fire id. Past the
last rung the failure is delivered as any other, and the job waits for its next time.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import timedelta

from hbgw.core.clock import iso
from hbgw.core.errors import StaleFence
from hbgw.core.metrics import count_delivery, gateway_metrics
from hbgw.sessions.grammar.job_schedule import describe_job_schedule
from hbgw.sessions.states import DeliveryState, JobStatus, RunState
from hbgw.sessions.store import Jobs, Ledger
from hbgw.sessions.views import (
    DeliveryOutcome,
    Duplicate,
    JobNotStarted,
    JobStart,
    JobStarted,
    JobView,
    ReplyStart,
)
from hbgw.workers.agents.base import TurnFailed, TurnRequest
from hbgw.workers.heartbeat_tools import SessionHeartbeatTools
from hbgw.workers.heartbeat_turn import count_refund, grant_refusal, settle_duplicate
from hbgw.workers.injection import is_silent
from hbgw.workers.job_admission import JobFire
from hbgw.workers.locks import Lease
from hbgw.workers.logfields import fields, log
from hbgw.workers.ports import Address
from hbgw.workers.turn import Composed, Outgoing, Sent, Turn
from hbgw.workers.turn_io import HISTORY_TURNS, Answer, Delivery, TurnIO, conversation_before
from hbgw.workers.turn_redis import after_finish


def job_message(job: JobView) -> str:
    """The prompt as the agent sees it: a header naming the job, then the prompt."""
    schedule = describe_job_schedule(job.state.schedule)
    return f"[Cron job {job.id} — scheduled prompt, {schedule}]\n{job.state.prompt}"


@dataclass(frozen=True)
class JobBegun:
    fire: JobFire
    started: JobStarted
    address: Address
    tools: SessionHeartbeatTools


class JobTurn(Turn[JobBegun]):
    # A scheduled turn, quiet like a heartbeat's (rule 8); "job" in hbgw_turn_seconds.
    kind = "job"

    def __init__(
        self,
        io: TurnIO,
        jobs: Jobs,
        ledger: Ledger,
        *,
        refund_backoff_ms: int,
        retry_ladder: tuple[float, ...],
    ) -> None:
        """``ledger``: the fenced mark and a lost lock's settle; ``retry_ladder``:
        HBGW_JOB_RETRY_DELAYS, the rungs a run climbs while the model is unreachable."""
        super().__init__(io)
        self.jobs = jobs
        self.ledger = ledger
        self.refund_backoff_ms = refund_backoff_ms
        self.retry_ladder = retry_ladder

    def begin(self, lease: Lease, fire: JobFire) -> JobBegun | None:
        """At the lock grant, one transaction: claim its fence, reserve the run, re-check it and
        start it (or give it back at once); None when it does not start (the index settled)."""
        p, sid = self.parts, lease.session_id
        begun = self.jobs.begin_job_fire(
            sid,
            lease.fence,
            fire.job_id,
            fire.fire_id,
            fire.due_ms,
            p.clock(),
            JobStart(
                fire.session.conversation,
                job_message,
                HISTORY_TURNS,
                refusal=grant_refusal(p.worker, lease),
                worker=p.worker,
                deferred=fire.deferred,
            ),
        )
        count_delivery(self.io.channel.name, DeliveryState.UNKNOWN.value, begun.unknown)
        outcome, due = begun.outcome, begun.job.next_due if begun.job is not None else None
        if isinstance(outcome, JobStarted):
            gateway_metrics().fire_lag.observe(max(0, p.now_ms() - fire.due_ms) / 1000)
            self.io.hold_stamp(lease, "job:start")
            session = fire.session
            address = Address(session.platform, session.chat, session.thread, owner=session.owner)
            return JobBegun(fire, outcome, address, self.io.toolbox(sid, "heartbeat", address))
        if isinstance(outcome, JobNotStarted):
            self._refunded(fire, outcome)
        elif isinstance(outcome, Duplicate):
            settle_duplicate(p.due, p.clock, fire.member, outcome.run, due)
        else:
            log.info(
                "job fire %s refused: %s",
                fire.fire_id,
                outcome.reason,
                extra=fields("job.refused", fire.session.id, fire.fire_id),
            )
            p.due.apply(fire.member, due)  # what SQL said in that transaction: no new read
        return None

    def run(self, lease: Lease, begun: JobBegun) -> None:
        self.execute(lease, begun)

    def _refunded(self, fire: JobFire, refunded: JobNotStarted) -> None:
        p = self.parts
        count_refund(refunded.reason)
        log.info(
            "job fire %s %s: %s",
            fire.fire_id,
            refunded.run.state,
            refunded.reason,
            extra=fields("job.refund", fire.session.id, fire.fire_id),
        )
        if refunded.job.status != JobStatus.ACTIVE or refunded.job.next_due is None:
            p.due.apply(fire.member, refunded.job.next_due)
        else:
            # Back off so a persistent cause of refusal (estop) cannot spin.
            p.due.index.schedule(fire.member, p.now_ms() + self.refund_backoff_ms)

    # -- the skeleton's steps -----------------------------------------------------------------

    def request(self, plan: JobBegun) -> TurnRequest:
        injected = plan.started.message
        history = conversation_before(injected, plan.started.history)
        return TurnRequest(
            plan.fire.session.id,
            "heartbeat",
            injected.text,
            history,
            heartbeat=plan.tools,
            model=plan.started.job.model,
        )

    def progress_to(self, plan: JobBegun) -> Address | None:
        return None  # a scheduled turn shows no typing or progress (rule 8)

    def address(self, plan: JobBegun) -> Address:
        return plan.address

    def compose(self, plan: JobBegun, answer: Answer) -> Composed:
        fid = plan.fire.fire_id
        if self._retry_delay(plan, answer) is not None:
            return Composed(answer, None, suppressed_key=fid)  # nothing said until the ladder ends
        if answer.failure is not None:
            text = f"⚠ Cron job {plan.fire.job_id} failed: {answer.failure}"
            return Composed(answer, Outgoing(text, Delivery("failure", fid, fire_id=fid)))
        if is_silent(answer.text):
            return Composed(answer, None, suppressed_key=fid)
        return Composed(answer, Outgoing(answer.text, Delivery("heartbeat", fid, fire_id=fid)))

    def mark(self, lease: Lease, plan: JobBegun, composed: Composed) -> ReplyStart | None:
        assert composed.reply is not None
        kind = composed.reply.delivery.kind
        self.ledger.mark_delivering(
            plan.started.run.key,
            lease.fence,
            self.parts.clock(),
            channel=self.io.channel.name,
            kind=kind,
        )
        return ReplyStart(possible_repeat=False)  # a fire is sent by one grant only

    def finish(
        self,
        lease: Lease,
        plan: JobBegun,
        composed: Composed,
        sent: Sent | None,
        outcome: DeliveryOutcome,
    ) -> None:
        sid, fid, answer = lease.session_id, plan.fire.fire_id, composed.answer
        delay = self._retry_delay(plan, answer)
        if sent is None and delay is not None:
            self._retry(lease, plan, answer, delay)
            return
        if sent is None:
            reply, result = answer.text, RunState.SILENT
        else:
            reply = sent.reply.text
            failed = answer.failure is not None or outcome.state is DeliveryState.FAILED
            result = RunState.FAILED if failed else RunState.COMPLETED
        finished = self.jobs.finish_job_fire(
            plan.started.run.key,
            result,
            lease.fence,
            self.parts.clock(),
            reply=reply,
            reply_kind="notice" if result is RunState.FAILED else "assistant",
            detail=outcome.error if outcome.state is DeliveryState.FAILED else None,
            usage=answer.usage,
            delivered=outcome,
            channel=self.io.channel.name,
        )
        gateway_metrics().fires.labels(result.value).inc()
        log.info("job fire %s %s", fid, result, extra=fields("job.done", sid, fid))
        # With the drain's next step, in its round trip: the answer reaches the API's event
        # streams (if it left), the index gets the job's due time SQL answered, the stamp idle.
        member, due = plan.fire.member, finished.job.next_due
        after_finish(self.parts, lease, due, wake=sent is not None, member=member)

    def _retry_delay(self, plan: JobBegun, answer: Answer) -> float | None:
        """Seconds to the ladder's next rung when the model was unreachable; None when the run
        ends here (it did not fail so, or the ladder is climbed: then it fails visibly)."""
        failure, ladder = answer.failure, self.retry_ladder
        if not isinstance(failure, TurnFailed) or not failure.unreachable:
            return None
        rung = plan.started.job.state.retries
        return ladder[rung] if rung < len(ladder) else None

    def _retry(self, lease: Lease, plan: JobBegun, answer: Answer, delay: float) -> None:
        fid, job_id = plan.fire.fire_id, plan.fire.job_id
        now = self.parts.clock()
        retry_at = now + timedelta(seconds=delay)
        rung = plan.started.job.state.retries + 1
        of = len(self.retry_ladder)
        detail = f"model unreachable, retry {rung} of {of} at {iso(retry_at)}: {answer.failure}"
        notice = f"⚠ Cron job {job_id}: {answer.failure} Trying again at {iso(retry_at)}."
        finished = self.jobs.retry_job_fire(
            plan.started.run.key,
            lease.fence,
            now,
            detail=detail,
            notice=notice,
            usage=answer.usage,
            retry_at=retry_at,
        )
        gateway_metrics().fires.labels(RunState.FAILED.value).inc()
        log.info("job fire %s %s", fid, detail, extra=fields("job.retry", lease.session_id, fid))
        after_finish(self.parts, lease, finished.job.next_due, wake=False, member=plan.fire.member)

    def aborted(self, lease: Lease, plan: JobBegun, mark: ReplyStart | None, sent: int) -> None:
        gateway_metrics().fires.labels(RunState.FAILED.value).inc()
        assert sent == 0  # a job turn stops only at a check before its one send
        with contextlib.suppress(StaleFence):
            self.ledger.settle_lost(
                plan.started.run.key, lease.fence, self.parts.clock(), nothing_sent=True
            )
        if mark is not None:
            count_delivery(self.io.channel.name, DeliveryState.FAILED.value)
