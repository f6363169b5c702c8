"""Beat holds a worker's fires while its queue still has a message waiting, and sends a tick's
messages in one batch (beat/held_fires.py, Dispatcher.batch): on a real Redis and a real Celery
app; the consumer's taking a message is played by reading it off the queue, as a consumer does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from pydantic import ValidationError
from support.broker import take_fires, take_messages
from support.harness import Gateway, gateway_settings
from support.redis_count import RedisCounter

from hbgw.beat.core import BeatCore
from hbgw.beat.held_fires import HeldFires
from hbgw.core.clock import utcnow
from hbgw.core.settings import Settings
from hbgw.sessions.states import job_member

WORKERS = ["w1", "w2", "w3"]
HOLD_S = 2.0


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def held(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[tuple[Gateway, Clock]]:
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns, beat_hold=HOLD_S), redis_url)
    clock = Clock()
    gw.rt.clock = clock
    try:
        yield gw, clock
    finally:
        for worker in WORKERS:
            take_messages(gw.app, gw.rt.keys.worker_queue(worker))
        gw.close()


def due(gw: Gateway, sessions: list[str]) -> None:
    gw.rt.index.schedule_many({sid: gw.rt.now_ms() - 1000 for sid in sessions})


def queue_of(gw: Gateway, worker: str = "w1") -> str:
    return gw.rt.keys.worker_queue(worker)


def test_a_busy_queue_gets_the_next_fires_in_one_message_once_it_is_taken(
    held: tuple[Gateway, Clock],
) -> None:
    gw, _clock = held
    gw.rt.registry.refresh("w1", gw.rt.now_ms())
    beat = BeatCore(gw.rt, gw.dispatcher)
    due(gw, ["a1", "a2"])
    beat.tick()  # the queue was empty: sent at once
    due(gw, ["b1", "b2"])
    beat.tick()
    due(gw, ["c1"])
    beat.tick()
    assert len(beat.held) == 3  # the first message is still waiting in the queue
    assert [sid for sid, _ in take_fires(gw.app, queue_of(gw))] == ["a1", "a2"]

    beat.tick()  # taken: everything held goes out together
    messages = take_messages(gw.app, queue_of(gw))
    assert len(messages) == 1 and len(beat.held) == 0
    assert sorted(fires_of(messages[0])) == ["b1", "b2", "c1"]


def test_a_queue_that_is_never_taken_from_gets_its_fires_after_the_hold(
    held: tuple[Gateway, Clock],
) -> None:
    gw, clock = held
    gw.rt.registry.refresh("w1", gw.rt.now_ms())
    beat = BeatCore(gw.rt, gw.dispatcher)
    due(gw, ["a1"])
    beat.tick()
    due(gw, ["b1"])
    beat.tick()
    clock.now += timedelta(seconds=HOLD_S / 2)
    gw.rt.registry.refresh("w1", gw.rt.now_ms())
    beat.tick()
    assert len(beat.held) == 1  # held since the second tick: not long enough yet

    clock.now += timedelta(seconds=HOLD_S / 2)
    gw.rt.registry.refresh("w1", gw.rt.now_ms())
    beat.tick()
    assert len(beat.held) == 0
    fires = take_fires(gw.app, queue_of(gw))
    assert [sid for sid, _ in fires] == ["a1", "b1"]  # in two messages, the second after the hold


def fires_of(message: tuple[str, list[Any]]) -> list[str]:
    return [str(sid) for sid, _due in message[1][0]]


def test_only_the_busy_worker_waits_and_a_stopping_beat_sends_what_it_holds(
    held: tuple[Gateway, Clock],
) -> None:
    gw, _clock = held
    for worker in WORKERS:
        gw.rt.registry.refresh(worker, gw.rt.now_ms())
    beat = BeatCore(gw.rt, gw.dispatcher)
    sessions = [f"s{i}" for i in range(60)]
    due(gw, sessions[:30])
    beat.tick()  # every worker got a message
    fired = [sid for w in WORKERS[1:] for sid, _ in take_fires(gw.app, queue_of(gw, w))]
    due(gw, sessions[30:])  # w2 and w3 took theirs; w1 has not
    beat.tick()
    held_now = len(beat.held)
    assert held_now > 0
    for worker in WORKERS[1:]:
        (message,) = take_messages(gw.app, queue_of(gw, worker))  # not held back
        fired += fires_of(message)

    beat.leave()  # a clean stop: the held fires go out, nothing waits for the claim lease
    assert len(beat.held) == 0
    first, second = take_messages(gw.app, queue_of(gw))
    assert len(fires_of(second)) == held_now
    fired += fires_of(first) + fires_of(second)
    assert Counter(fired) == Counter(sessions)  # each due session exactly once


def test_a_ticks_messages_and_their_task_events_are_one_round_trip(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, task_events=True)
    gw = Gateway(settings, redis_url)
    try:
        for worker in WORKERS:
            gw.rt.registry.refresh(worker, gw.rt.now_ms())
        beat = BeatCore(gw.rt, gw.dispatcher)
        beat.refresh_shards(gw.rt.now_ms())
        due(gw, [f"s{i}" for i in range(30)])
        with gw.app.producer_or_acquire() as producer:
            # The producer pool hands this producer to the tick's batch: count its connections.
            counter = RedisCounter(redis.Redis(connection_pool=producer.channel.pool))
        with counter.counting() as trips:
            assert beat.dispatch_due(gw.rt.now_ms(), WORKERS) == 30
        publishes = [names for names in trips.sent if "LPUSH" in names]
        assert len(publishes) == 1, trips.lines
        assert Counter(publishes[0]) == {"LPUSH": 3, "PUBLISH": 3}  # a message and its event each
        for worker in WORKERS:
            assert len(take_messages(gw.app, queue_of(gw, worker))) == 1
    finally:
        for worker in WORKERS:
            take_messages(gw.app, queue_of(gw, worker))
        gw.close()


def test_the_hold_itself() -> None:
    hold = HeldFires(hold_ms=1000)
    fires = [("a", 1), ("b", 2)]
    assert not hold.settle(fires, waiting=True, now_ms=10_000)
    assert hold.take() == fires
    assert not hold.settle([*fires, ("c", 3)], waiting=True, now_ms=10_999)
    assert hold.settle([*fires, ("c", 3)], waiting=True, now_ms=11_000)  # the oldest's hold is up
    assert len(hold) == 0
    assert HeldFires(hold_ms=0).settle(fires, waiting=True, now_ms=0)  # 0: never held
    assert hold.settle(fires, waiting=False, now_ms=0)


def test_a_hold_as_long_as_the_claim_lease_is_refused() -> None:
    with pytest.raises(ValidationError, match="HBGW_BEAT_HOLD"):
        Settings(beat_hold=60, claim_lease=60)


def test_a_rebuild_puts_held_cron_job_fires_back_in_the_index(
    held: tuple[Gateway, Clock],
) -> None:
    gw, _clock = held
    gw.rt.registry.refresh("w1", gw.rt.now_ms())
    beat = BeatCore(gw.rt, gw.dispatcher)
    beat.refresh_shards(gw.rt.now_ms())
    due(gw, ["a1"])
    beat.dispatch_due(gw.rt.now_ms(), ["w1"])  # the queue was empty: sent
    job = job_member("j1")
    gw.rt.index.schedule(job, gw.rt.now_ms() - 500)
    due(gw, ["b1"])
    beat.dispatch_due(gw.rt.now_ms(), ["w1"])
    assert len(beat.held) == 2  # the first message still waits

    # Redis lost its data and a rebuild runs: cron jobs wait for it, held or not.
    beat.dispatch_due(gw.rt.now_ms(), ["w1"], jobs=False)
    assert len(beat.held) == 1
    assert gw.rt.index.due_ms(job) == gw.rt.now_ms() - 500  # due again as it was
    take_messages(gw.app, queue_of(gw))
    beat.dispatch_due(gw.rt.now_ms(), ["w1"], jobs=False)
    assert [sid for sid, _ in take_fires(gw.app, queue_of(gw))] == ["b1"]
