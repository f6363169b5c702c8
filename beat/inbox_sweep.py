"""Beat's inbox sweep: queued user messages whose session has no turn running are asked for
again (``BeatCore.sweep_inboxes``)."""

from __future__ import annotations

from hbgw.beat.stop_flag import StopFlag
from hbgw.state.dispatch import Dispatcher
from hbgw.state.keys import shard_of
from hbgw.state.ownership import rendezvous_owner
from hbgw.state.redis_part import RedisPart
from hbgw.state.turn_gate import TurnGate

# A session's drain is asked for again at most this often (an emergency stop lifted is seen
# within it): a drain waiting for a busy worker's turn thread is not joined by one more per tick.
DRAIN_REASK_MS = 1000


class InboxSweep:
    def __init__(
        self,
        gate: TurnGate,
        redis: RedisPart,
        shards: int,
        dispatcher: Dispatcher,
        stopping: StopFlag,
    ) -> None:
        self.gate = gate
        self.redis = redis
        self.shards = shards
        self.dispatcher = dispatcher
        self.stopping = stopping
        # Session -> when the sweeper last asked for its drain (ms).
        self.drains_asked: dict[str, int] = {}

    def run(self, own: set[int], workers: list[str], now_ms: int) -> None:
        """Covers a worker that died between queueing and draining: its queue is gone with it,
        but the inbox in Redis is not. Each replica sweeps the sessions of its own shards, so
        two beats never drain the same session. A session's drain is asked for again at most
        every ``DRAIN_REASK_MS``: beat ticks up to 20 times a second while heartbeats are due,
        and a drain waiting for a busy worker's turn thread was joined by one more at every
        tick (a storm on a slow machine).
        """
        gate, keys, client = self.gate, self.redis.keys, self.redis.client
        asked, self.drains_asked = self.drains_asked, {}
        for raw in client.smembers(keys.inbox_sessions()):
            if self.stopping.is_set():
                return  # the next beat (or replica) sweeps again; shutdown is not delayed
            sid = str(raw)
            if shard_of(sid, self.shards) not in own:
                continue
            if gate.backlog(sid) == 0:
                client.srem(keys.inbox_sessions(), sid)
                continue
            last = asked.get(sid)
            if last is not None and now_ms - last < DRAIN_REASK_MS:
                self.drains_asked[sid] = last
                continue
            if gate.lock_holder(sid) is None:
                owner = rendezvous_owner(sid, workers)
                if owner is not None:
                    self.dispatcher.drain(owner, sid)
                    self.drains_asked[sid] = now_ms
