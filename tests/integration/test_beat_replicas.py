"""Beat replicas split the due-index shards: a balanced assignment over a registry of live beats.

Each beat claims and sweeps only the shards it owns; a stale beat's shards are taken over; two
beats on one Redis claim disjoint shards and, together, every due heartbeat exactly once —
checked on the messages they published to the broker. Staleness is made by backdating.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import datetime

import pytest
from pydantic import ValidationError
from support.broker import take_fires, take_messages
from support.harness import Gateway

from hbgw.beat.core import DRAIN_REASK_MS, BeatCore
from hbgw.core.clock import utcnow
from hbgw.core.metrics import gateway_metrics
from hbgw.core.settings import Settings
from hbgw.state.dispatch import DRAIN_TASK
from hbgw.state.keys import shard_of

WORKER = "w1"
SESSIONS = [f"sess-{i}" for i in range(200)]


@pytest.fixture
def frozen(gateway: Gateway) -> Iterator[datetime]:
    """One instant for every tick, with a live worker that owns every session."""
    now = utcnow()
    gateway.rt.clock = lambda: now
    gateway.rt.registry.refresh(WORKER, gateway.rt.now_ms())
    yield now
    take_messages(gateway.app, gateway.rt.keys.worker_queue(WORKER))  # leave no queue behind


def two_beats(gw: Gateway) -> tuple[BeatCore, BeatCore]:
    a = BeatCore(gw.rt, gw.dispatcher, name="beat-a")
    b = BeatCore(gw.rt, gw.dispatcher, name="beat-b")
    now_ms = gw.rt.now_ms()
    # Both registered before either claims, as two beats that have been running a while.
    a.refresh_shards(now_ms)
    b.refresh_shards(now_ms)
    a.refresh_shards(now_ms)
    return a, b


def all_due(gw: Gateway) -> None:
    gw.rt.index.schedule_many({sid: gw.rt.now_ms() - 1000 for sid in SESSIONS})


def in_shards(shards: list[int], shard_count: int) -> set[str]:
    return {sid for sid in SESSIONS if shard_of(sid, shard_count) in shards}


def test_three_beats_split_the_shards_evenly_and_two_take_over_when_one_leaves(
    gateway: Gateway, frozen: datetime
) -> None:
    gw, shard_count = gateway, gateway.settings.due_shards
    beats = [BeatCore(gw.rt, gw.dispatcher, name=f"beat-{c}") for c in "abc"]
    now_ms = gw.rt.now_ms()
    for beat in [*beats, *beats]:  # twice: each has seen all three
        beat.refresh_shards(now_ms)
    owned = [len(beat.own_shards) for beat in beats]
    assert max(owned) - min(owned) <= 1 and sum(owned) == shard_count
    assert sorted(s for beat in beats for s in beat.own_shards) == list(range(shard_count))

    gone, *rest = beats
    gone.leave()
    for beat in rest:
        beat.refresh_shards(now_ms)
    assert sorted(s for beat in rest for s in beat.own_shards) == list(range(shard_count))
    assert abs(len(rest[0].own_shards) - len(rest[1].own_shards)) <= 1
    all_due(gw)
    queue = gw.rt.keys.worker_queue(WORKER)
    fired = []
    for beat in rest:
        beat.tick()
        fired.append({sid for sid, _ in take_fires(gw.app, queue)})
        assert fired[-1] == in_shards(beat.own_shards, shard_count)
    assert fired[0] | fired[1] == set(SESSIONS)  # the departed beat's shards included


def test_two_beats_claim_disjoint_shards_and_everything_exactly_once(
    gateway: Gateway, frozen: datetime
) -> None:
    gw, shard_count = gateway, gateway.settings.due_shards
    a, b = two_beats(gw)
    assert a.own_shards and b.own_shards
    assert sorted(a.own_shards + b.own_shards) == list(range(shard_count))
    all_due(gw)
    queue = gw.rt.keys.worker_queue(WORKER)

    a.tick()
    from_a = take_fires(gw.app, queue)
    b.tick()
    from_b = take_fires(gw.app, queue)
    a.tick()
    b.tick()

    assert {sid for sid, _ in from_a} == in_shards(a.own_shards, shard_count)
    assert {sid for sid, _ in from_b} == in_shards(b.own_shards, shard_count)
    assert Counter(sid for sid, _ in from_a + from_b) == Counter(SESSIONS)
    assert take_fires(gw.app, queue) == []  # leased: the next ticks find nothing due


def test_beats_that_disagree_during_a_membership_change_never_claim_twice(
    gateway: Gateway, frozen: datetime
) -> None:
    gw = gateway
    a = BeatCore(gw.rt, gw.dispatcher, name="beat-a")
    a.refresh_shards(gw.rt.now_ms())
    assert len(a.own_shards) == gw.settings.due_shards  # alone: a still believes it owns all
    b = BeatCore(gw.rt, gw.dispatcher, name="beat-b")
    all_due(gw)
    workers = [WORKER]

    b.refresh_shards(gw.rt.now_ms())  # b sees both beats; a has not ticked since b came
    assert 0 < len(b.own_shards) < gw.settings.due_shards
    # Both claim b's shards: b first, then a with its outdated view of every shard.
    counted = b.dispatch_due(gw.rt.now_ms(), workers) + a.dispatch_due(gw.rt.now_ms(), workers)

    fires = take_fires(gw.app, gw.rt.keys.worker_queue(WORKER))
    assert counted == len(SESSIONS)
    assert Counter(sid for sid, _ in fires) == Counter(SESSIONS)


def test_a_stale_beats_shards_are_taken_over(gateway: Gateway, frozen: datetime) -> None:
    gw = gateway
    a, b = two_beats(gw)
    ttl_ms = int(gw.settings.beat_ttl * 1000)
    later = gw.rt.now_ms() + ttl_ms + 1  # a stopped ticking one TTL ago

    b.refresh_shards(later)

    assert b.own_shards == list(range(gw.settings.due_shards))
    a.refresh_shards(later)  # a comes back, and on b's next tick they split the shards again
    b.refresh_shards(later)
    assert sorted(a.own_shards + b.own_shards) == list(range(gw.settings.due_shards))
    assert set(a.own_shards).isdisjoint(b.own_shards)


def test_a_beat_that_leaves_hands_its_shards_over_at_once(
    gateway: Gateway, frozen: datetime
) -> None:
    gw = gateway
    a, b = two_beats(gw)
    a.leave()
    b.refresh_shards(gw.rt.now_ms())
    assert b.own_shards == list(range(gw.settings.due_shards))


def test_a_beat_reregisters_at_once_when_redis_lost_its_entry(
    gateway: Gateway, frozen: datetime
) -> None:
    gw = gateway
    a, _b = two_beats(gw)
    gw.rt.client.delete(gw.rt.keys.beats())  # Redis restarted empty

    a.tick()

    assert a.beats.live(gw.rt.now_ms()) == ["beat-a"]
    assert a.own_shards == list(range(gw.settings.due_shards))


def test_each_beat_sweeps_only_the_inboxes_of_its_own_shards(
    gateway: Gateway, frozen: datetime
) -> None:
    gw, shard_count = gateway, gateway.settings.due_shards
    a, b = two_beats(gw)
    for sid in SESSIONS:
        gw.rt.gate.enqueue_user(sid, "1")
    queue = gw.rt.keys.worker_queue(WORKER)

    a.sweep_inboxes([WORKER])
    swept_a = [args[0] for task, args in take_messages(gw.app, queue) if task == DRAIN_TASK]
    b.sweep_inboxes([WORKER])
    swept_b = [args[0] for task, args in take_messages(gw.app, queue) if task == DRAIN_TASK]

    assert set(swept_a) == in_shards(a.own_shards, shard_count)
    assert set(swept_b) == in_shards(b.own_shards, shard_count)
    assert Counter(swept_a + swept_b) == Counter(SESSIONS)


def test_the_backlog_gauge_shows_only_the_beats_own_shards(
    gateway: Gateway, frozen: datetime
) -> None:
    gw = gateway
    a, b = two_beats(gw)
    all_due(gw)
    gauge = gateway_metrics().due_backlog

    def reported() -> dict[int, float]:
        return {
            int(s.labels["shard"]): s.value
            for metric in gauge.collect()
            for s in metric.samples
            if s.name == "hbgw_due_backlog"
        }

    b.measure_backlog(gw.rt.now_ms())
    a.measure_backlog(gw.rt.now_ms())  # one process: a's figures replace b's

    expected = Counter(shard_of(sid, gw.settings.due_shards) for sid in SESSIONS)
    assert reported() == {shard: float(expected[shard]) for shard in a.own_shards}


def test_the_beat_ttl_must_outlast_a_pause_between_ticks() -> None:
    with pytest.raises(ValidationError, match="HBGW_BEAT_TTL"):
        Settings(beat_ttl=1.0, beat_max_sleep=1.0)


def test_the_index_reads_only_the_shards_asked_for(gateway: Gateway, frozen: datetime) -> None:
    index, now_ms = gateway.rt.index, gateway.rt.now_ms()
    all_due(gateway)
    first = shard_of(SESSIONS[0], index.shards)
    expected = in_shards([first], index.shards)

    assert set(index.backlog(now_ms, [first])) == {first}
    assert index.earliest_ms([]) is None and index.backlog(now_ms, []) == {}
    assert {sid for sid, _ in index.claim_all(now_ms, 1000, 7, shards=[first])} == expected
    assert index.claim_all(now_ms, 1000, 7, shards=[]) == []
    with pytest.raises(ValueError, match="shards must be in"):
        index.claim_all(now_ms, 1000, 7, shards=[index.shards])


def test_a_queued_drain_is_asked_for_again_at_most_once_a_second(
    gateway: Gateway, frozen: datetime
) -> None:
    # A drain waiting for a busy worker's turn thread must not be joined by one more per tick.
    gw = gateway
    beat = BeatCore(gw.rt, gw.dispatcher, name="beat-a")
    now_ms = gw.rt.now_ms()
    beat.refresh_shards(now_ms)
    gw.rt.gate.enqueue_user(SESSIONS[0], "1")
    queue = gw.rt.keys.worker_queue(WORKER)

    def drains_after_sweep(at_ms: int) -> int:
        beat.sweep_inboxes([WORKER], at_ms)
        return sum(1 for task, _ in take_messages(gw.app, queue) if task == DRAIN_TASK)

    assert drains_after_sweep(now_ms) == 1
    assert drains_after_sweep(now_ms + DRAIN_REASK_MS - 1) == 0
    assert drains_after_sweep(now_ms + DRAIN_REASK_MS) == 1
