"""The Redis work of a heartbeat turn, pipelined: each function is one round trip for what the
turn asked Redis one command at a time before (issue 16: ≤ 3 round trips per turn is the goal).

Only plain commands go into these pipelines (no multi-key command, no script), so a cluster
client may split them by slot; what each answers is exactly what its single command answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import redis

from hbgw.core.clock import to_ms
from hbgw.state.ownership import rendezvous_owner
from hbgw.state.runtime import Runtime
from hbgw.workers.logfields import fields, log


@dataclass(frozen=True)
class Recheck:
    """The re-check's Redis part after a reservation: the emergency stop (global or the
    session's) and the session's owner among the live workers, read together."""

    estop: bool
    owner: str | None


def recheck(rt: Runtime, session_id: str) -> Recheck:
    """``TurnGate.estop_active`` and ``WorkerRegistry.owner`` in one round trip."""
    now_ms = rt.now_ms()
    pipe = rt.client.pipeline(transaction=False)
    pipe.exists(rt.keys.estop())
    pipe.exists(rt.keys.estop(session_id))
    pipe.zrangebyscore(rt.keys.workers(), now_ms - rt.registry.ttl_ms, "+inf")
    every, own, members = pipe.execute()
    live = sorted(str(m) for m in members)
    return Recheck(bool(int(every) or int(own)), rendezvous_owner(session_id, live))


def wake_and_idle(rt: Runtime, session_id: str) -> None:
    """After a user turn's reply committed, in one round trip: wake the session's event streams
    and stamp ``idle``. Both best effort, as they were one at a time: a missed wake-up is
    delivered by the streams' slow poll, a stamp by the next."""
    pipe = rt.client.pipeline(transaction=False)
    pipe.publish(rt.keys.events(session_id), "1")
    rt.liveness.stamp(session_id, rt.now_ms(), "idle", rt.worker, pipe=pipe)
    try:
        replies = pipe.execute(raise_on_error=False)
    except (redis.RedisError, OSError) as exc:
        replies = [exc]
    for reply in replies:
        if isinstance(reply, Exception):
            log.info("wake and idle: %s", reply, extra=fields("turn.after_reply", session_id))


def after_finish(rt: Runtime, session_id: str, due: datetime | None, *, wake: bool) -> None:
    """After the finish committed, in one round trip: wake the session's event streams (if a
    message left), write the due time SQL answered (``Runtime.apply_due``) and stamp ``idle``.

    A failing round trip raises as ``apply_due`` did (the index is the one write that matters;
    beat's restore pass settles an entry left behind); the wake-up and the stamp were best
    effort before and still are: a command error of theirs is only logged."""
    pipe = rt.client.pipeline(transaction=False)
    if wake:
        pipe.publish(rt.keys.events(session_id), "1")
    shard = rt.index.shard_key(session_id)
    if due is None:
        pipe.zrem(shard, session_id)
    else:
        pipe.zadd(shard, {session_id: to_ms(due)})
    rt.liveness.stamp(session_id, rt.now_ms(), "idle", rt.worker, pipe=pipe)
    replies = pipe.execute(raise_on_error=False)
    index_reply = replies[1 if wake else 0]
    if isinstance(index_reply, Exception):
        raise index_reply
    for reply in replies:
        if isinstance(reply, redis.RedisError):
            log.info("after finish: %s", reply, extra=fields("turn.after_finish", session_id))
