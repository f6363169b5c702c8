"""The turn runner: the entry point the Celery tasks call.

It is the worker's composition root: it keeps the ``Runtime`` and hands each unit only the parts
it uses (store parts, the gate, the due index's settle rule, the clock, this worker's name, a
few settings). It wires the units together: admission decides whether a fire or a drain is accepted
(``workers/admission.py``); an accepted one waits for a thread of the turn executor, which
takes the lock there and runs the locked session loop (``workers/session_loop.py``): the
heartbeat turn (``workers/heartbeat_turn.py``) and the user turns (``workers/user_turn.py``)
under one lock, fence and error policy. The executor holds ``hbgw worker --turns`` turns at
once (``HBGW_WORKER_TURNS``), each waiting for its model in a thread; a backlog waits in its
queue without a lock. One ``LockRenewals`` thread renews the locks of all of them.
"""

from __future__ import annotations

import contextlib
import functools
from concurrent.futures import Future, ThreadPoolExecutor

import redis

from hbgw.sessions.grammar import limits_from_settings
from hbgw.state.dispatch import Dispatcher
from hbgw.state.runtime import Runtime
from hbgw.workers.admission import Admission
from hbgw.workers.agents.base import Agent
from hbgw.workers.delivery_retry import DeliveryRetrier
from hbgw.workers.heartbeat_turn import AfterStartHook, BeforeBeginHook, Fire, HeartbeatTurn
from hbgw.workers.job_admission import JobFire, JobFires
from hbgw.workers.job_turn import JobTurn
from hbgw.workers.locks import LockRenewals
from hbgw.workers.logfields import is_transient, report
from hbgw.workers.ports import Channel
from hbgw.workers.session_loop import SessionLoop
from hbgw.workers.turn_io import TurnIO
from hbgw.workers.turn_parts import RetryPolicy, TurnParts
from hbgw.workers.turn_redis import LockReads
from hbgw.workers.user_turn import UserTurn

__all__ = ["AfterStartHook", "BeforeBeginHook", "TurnRunner"]


class TurnRunner:
    def __init__(
        self,
        rt: Runtime,
        dispatcher: Dispatcher,
        *,
        agent: Agent,
        channel: Channel,
        threads: int = 8,
    ) -> None:
        self.rt = rt
        self.agent = agent
        self.channel = channel
        self.dispatcher = dispatcher
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hbgw-turn")
        # Test seams (they stage races, ``heartbeat_turn.BeforeBeginHook``): before a heartbeat
        # fire's lock is taken, and once its run started.
        self.before_begin: list[BeforeBeginHook] = []
        self.after_start: list[AfterStartHook] = []
        self.lease_ms = int(rt.settings.lock_lease * 1000)
        self.renewals = LockRenewals(rt.gate, self.lease_ms)
        with contextlib.suppress(redis.RedisError):  # else loaded at the first NOSCRIPT
            rt.gate.load_scripts()
        self.admission = self._admission(rt, dispatcher)
        self.loop = self._session_loop(rt, dispatcher, TurnIO(turn_parts(rt), agent, channel))

    def _admission(self, rt: Runtime, dispatcher: Dispatcher) -> Admission:
        store, clock, worker = rt.store, rt.clock, rt.worker
        jobs = JobFires(
            store.jobs,
            rt.due,
            rt.registry,
            dispatcher,
            clock=clock,
            worker=worker,
            start=self._start,
        )
        return Admission(
            store.ledger,
            store.sessions,
            rt.due,
            LockReads(rt.gate, rt.redis, rt.registry, clock),
            dispatcher,
            jobs,
            worker=worker,
            lease_ms=self.lease_ms,
            start=self._start,
        )

    def _session_loop(self, rt: Runtime, dispatcher: Dispatcher, io: TurnIO) -> SessionLoop:
        store, settings = rt.store, rt.settings
        refund_backoff_ms = int(settings.refund_backoff * 1000)
        return SessionLoop(
            rt.gate,
            store.ledger,
            store.sessions,
            dispatcher,
            clock=rt.clock,
            worker=rt.worker,
            heartbeat=HeartbeatTurn(
                io,
                store.ledger,
                refund_backoff_ms=refund_backoff_ms,
                after_start=self.after_start,
            ),
            user=UserTurn(io, store.messages, store.ledger),
            job=JobTurn(
                io,
                store.jobs,
                store.ledger,
                refund_backoff_ms=refund_backoff_ms,
                retry_ladder=settings.job_retry_ladder,
            ),
            lease_ms=self.lease_ms,
            renewals=self.renewals,
            on_pending=functools.partial(self.accept_fire, deferred=True),
            retrier=DeliveryRetrier(io, store.deliveries),
        )

    def shutdown(self, wait: bool = True) -> None:
        self.executor.shutdown(wait=wait)
        if wait:
            self.renewals.close()

    # -- entry points (the Celery tasks call these) -----------------------------------------

    def accept_fires(self, fires: list[tuple[str, int]]) -> list[str]:
        """One outcome per fire, the batch admitted together; a fire that fails does not stop
        the rest of the batch (it comes back after the claim lease)."""
        return self.admission.fires(fires)

    def accept_fire(self, session_id: str, due_ms: int, *, deferred: bool = False) -> str:
        """Decide what to do with one fire; a turn that can start runs on the executor."""
        return self.admission.fire(session_id, due_ms, deferred=deferred)

    def drain(self, session_id: str) -> str:
        """A user message was queued: run the inbox under the lock if nobody else is."""
        try:
            return self.admission.drain(session_id)
        except Exception as exc:
            if not is_transient(exc):
                raise
            # The messages wait in the inbox; beat's sweeper asks again.
            report("drain not accepted", exc, "drain.error", session_id)
            return "error"

    # -- the executor ---------------------------------------------------------------------

    def _start(self, sid: str, fire: Fire | None) -> None:
        # Shutting down: submit raises, the task fails, and the claim lease (or beat's inbox
        # sweeper) brings the request back; no lock was taken yet.
        future = self.executor.submit(self._turn, sid, fire)
        future.add_done_callback(functools.partial(_log_failure, sid, fire))

    def _turn(self, sid: str, fire: Fire | None) -> None:
        """On a turn thread: take the lock now, so its keeper renews it from the first moment."""
        if fire is not None and not isinstance(fire, JobFire):
            for hook in self.before_begin:
                hook(sid, fire.fire_id)
        grant = self.admission.take_lock(sid, fire)
        if grant is not None:
            self.loop.run(grant, fire)


def turn_parts(rt: Runtime) -> TurnParts:
    """What every turn shares, from the runtime (``workers/turn_parts.py``)."""
    settings = rt.settings
    return TurnParts(
        rt.store.heartbeats,
        rt.due,
        rt.gate,
        rt.liveness,
        rt.keys,
        rt.clock,
        rt.worker,
        RetryPolicy.of(settings),
        functools.partial(limits_from_settings, settings),
        settings.agent_heartbeat_write,
    )


def _log_failure(sid: str, fire: Fire | None, future: Future[None]) -> None:
    # The session loop handles its own errors; what escapes it (taking the lock with Redis
    # away, or a bug) is reported, never dropped.
    exc = future.exception()
    if exc is not None:
        report("turn crashed", exc, "turn.crashed", sid, fire.fire_id if fire else None)
