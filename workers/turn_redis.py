"""The Redis work of a turn, pipelined: ``begin_fire`` (``begin_job`` for a cron job's run) reads
a fire's re-check with its lock, in one round trip; what a finished turn leaves for Redis is
queued on its lease and rides ahead of the drain's next step (``TurnGate.next_step``), in its
round trip (issue 16: ≤ 3 round trips per heartbeat or cron job turn, ≤ 4 per user turn).

Besides the gate's own script (whose keys share the session's slot), only plain commands go into
these pipelines (no multi-key command), so a cluster client may split them by slot; what each
answers is exactly what its single command answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis

from hbgw.core.clock import Clock, to_ms
from hbgw.state.beat_registry import names
from hbgw.state.ownership import WorkerRegistry, rendezvous_owner
from hbgw.state.redis_part import RedisPart
from hbgw.state.turn_gate import Began, Busy, TurnGate
from hbgw.workers.locks import Lease, Recheck
from hbgw.workers.logfields import fields, log
from hbgw.workers.turn_parts import TurnParts


@dataclass(frozen=True)
class LockReads:
    """What admission reads with a lock or before a drain: the gate (the lock's script), the
    client and the key names (the emergency stops, the inbox, the live workers), the worker
    registry (its time to live) and the shared clock that time is measured on."""

    gate: TurnGate
    redis: RedisPart
    registry: WorkerRegistry
    clock: Clock

    def now_ms(self) -> int:
        return to_ms(self.clock())


def begin_fire(
    reads: LockReads, session_id: str, fire_id: str, token: str, lease_ms: int
) -> tuple[Began | Busy, Recheck]:
    """``TurnGate.try_begin_fire`` with the re-check's reads (``TurnGate.estop_active`` and
    ``WorkerRegistry.owner``) after it, in the same round trip: the emergency stop and the owner
    as they were with the lock taken, for ``begin_fire``'s one transaction."""
    queue, recheck = _recheck_reads(reads, session_id)
    began, read = reads.gate.try_begin_fire_reading(session_id, fire_id, token, lease_ms, queue)
    return began, recheck(read)


def begin_job(
    reads: LockReads, session_id: str, member: str, fire_id: str, token: str, lease_ms: int
) -> tuple[Began | Busy, Recheck]:
    """``begin_fire`` for a cron job's run (its ``member`` in the due index): the same reads,
    for ``begin_job_fire``'s one transaction."""
    queue, recheck = _recheck_reads(reads, session_id)
    began, read = reads.gate.try_begin_fire_reading(
        session_id, fire_id, token, lease_ms, queue, job=member
    )
    return began, recheck(read)


def _recheck_reads(
    reads: LockReads, session_id: str
) -> tuple[Callable[[redis.client.Pipeline], None], Callable[[list[Any]], Recheck]]:
    """The re-check's reads to queue after the lock's script, and what they answer."""
    keys, now_ms = reads.redis.keys, reads.now_ms()

    def queue(pipe: redis.client.Pipeline) -> None:
        pipe.exists(keys.estop())
        pipe.exists(keys.estop(session_id))
        reads.registry.queue_live(pipe, now_ms)

    def recheck(read: list[Any]) -> Recheck:
        every, own, members = read
        return Recheck(bool(int(every) or int(own)), rendezvous_owner(session_id, names(members)))

    return queue, recheck


@dataclass(frozen=True)
class DrainCheck:
    """What admission reads before a drain: messages queued or in flight, the emergency stop
    (global or the session's) and the session's owner among the live workers."""

    backlog: int
    estop: bool
    owner: str | None


def drain_check(reads: LockReads, session_id: str) -> DrainCheck:
    """``TurnGate.backlog``, ``TurnGate.estop_active`` and ``WorkerRegistry.owner`` in one
    round trip."""
    k, now_ms = reads.redis.keys, reads.now_ms()
    pipe = reads.redis.client.pipeline(transaction=False)
    pipe.llen(k.inbox(session_id))
    pipe.llen(k.inflight(session_id))
    pipe.exists(k.estop())
    pipe.exists(k.estop(session_id))
    reads.registry.queue_live(pipe, now_ms)
    queued, taken, every, own, members = pipe.execute()
    live = names(members)
    return DrainCheck(
        int(queued) + int(taken), bool(int(every) or int(own)), rendezvous_owner(session_id, live)
    )


def wake_and_idle(parts: TurnParts, lease: Lease) -> None:
    """After a user turn's reply committed: wake the session's event streams and stamp
    ``idle``, sent ahead of the drain's next step in its round trip (``Lease.after``). Both
    best effort: a missed wake-up is delivered by the streams' slow poll, a stamp by the next."""
    sid = lease.session_id

    def queue(pipe: redis.client.Pipeline) -> None:
        pipe.publish(parts.keys.events(sid), "1")
        parts.stamp(sid, parts.now_ms(), "idle", pipe=pipe)

    lease.after.append(queue)


def after_finish(
    parts: TurnParts, lease: Lease, due: datetime | None, *, wake: bool, member: str | None = None
) -> None:
    """After the finish committed: wake the session's event streams (if a message left), write
    the due time SQL answered (as ``DueSettle.apply`` would) under ``member`` (a cron job's
    ``job:<id>``; the session's own by default) and stamp ``idle`` — queued for the drain's
    next step, which sends them ahead of itself in one round trip (``Lease.after``).

    A command error of theirs is logged there (``log_after``): the due index self-heals (a
    claimed entry comes back after the claim lease and meets the ledger's duplicate, which
    settles it; beat's restore pass settles an entry left behind), the rest is best effort."""
    sid = lease.session_id

    def queue(pipe: redis.client.Pipeline) -> None:
        if wake:
            pipe.publish(parts.keys.events(sid), "1")
        entry = member or sid
        shard = parts.due.index.shard_key(entry)
        if due is None:
            pipe.zrem(shard, entry)
        else:
            pipe.zadd(shard, {entry: to_ms(due)})
        parts.stamp(sid, parts.now_ms(), "idle", pipe=pipe)

    lease.after.append(queue)


def log_after(session_id: str, errors: list[Exception]) -> None:
    """The command errors of what a turn left for the next step's round trip."""
    for error in errors:
        log.info("after the turn: %s", error, extra=fields("turn.after_finish", session_id))
