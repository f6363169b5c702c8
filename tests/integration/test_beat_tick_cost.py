"""The Redis round trips of one steady beat tick with fires to send, counted on a real Redis at
the connections of the state client and of the broker's producer (tests/support/redis_count.py).
Counts, never times: behind a slow link each is a whole round trip of the tick's chain.

Before (issue 16, +150 ms each way): 7 of the state's and one or two per owning worker of the
broker's — the registry refresh, the live workers, the pipelined claim's SCRIPT EXISTS, the
claim, the inbox sweep, the earliest due time; a publish and its task-sent event per worker.
Now: the registry refresh with the live workers and the restore sweep's state; the claim with
each shard's earliest due time left; the inbox sweep — and for the broker the queues' lengths
(``HeldFires``) and every message with its event in one batch.
"""

from __future__ import annotations

from pathlib import Path

import redis
from support.broker import take_messages
from support.harness import Gateway, gateway_settings
from support.redis_count import RedisCounter

from hbgw.beat.core import BeatCore

WORKERS = ["w1", "w2", "w3"]
STATE_ROUND_TRIPS = 3
BROKER_ROUND_TRIPS = 2


def test_a_steady_tick_costs_three_state_and_two_broker_round_trips(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, beat_hold=2, task_events=True)
    gw = Gateway(settings, redis_url)
    try:
        state = RedisCounter(gw.rt.client)
        with gw.app.producer_or_acquire() as producer:
            broker = RedisCounter(redis.Redis(connection_pool=producer.channel.pool))
        beat = BeatCore(gw.rt, gw.dispatcher)
        for tick in range(3):  # the first restores and declares the queues: not steady
            for worker in WORKERS:
                gw.rt.registry.refresh(worker, gw.rt.now_ms())
            due = {f"s{tick}-{i}": gw.rt.now_ms() - 1000 for i in range(30)}
            gw.rt.index.schedule_many(due)
            with state.counting() as trips, broker.counting() as sent:
                beat.tick()
            fired = [
                sid
                for worker in WORKERS
                for _task, args in take_messages(gw.app, gw.rt.keys.worker_queue(worker))
                for sid, _due in args[0]
            ]
            assert sorted(fired) == sorted(due)
        assert trips.round_trips <= STATE_ROUND_TRIPS, trips.lines
        assert sent.round_trips <= BROKER_ROUND_TRIPS, sent.lines
        assert "SCRIPT" not in {name for names in trips.sent for name in names}, trips.lines
    finally:
        for worker in WORKERS:
            take_messages(gw.app, gw.rt.keys.worker_queue(worker))
        gw.close()
