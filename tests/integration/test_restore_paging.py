"""Issue 10: the restore pass costs a bounded number of SQL rows per beat tick, whatever the
fleet; its cursor lives in Redis (a restarted beat continues, replicas share one sweep); a lost
epoch (Redis lost its data) starts a rebuild at once; one replica at a time runs a step.

Real Redis and SQLite; time is the tick's injected clock, never a sleep; cost is counted in rows
read from SQL, never in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine
from support.harness import Gateway, gateway_settings
from support.private_redis import PrivateRedis

from hbgw.beat.core import MIN_SLEEP, BeatCore
from hbgw.core.clock import to_ms, utcnow
from hbgw.sessions.states import MessageState
from hbgw.sessions.store import RestoreReads, Store
from hbgw.sessions.store.base import Database
from hbgw.sessions.views import QueuedPage, RestorablePage
from hbgw.state.restore_sweep import RestoreSweep
from hbgw.state.runtime import Runtime

PAGE = 5


class CountingReads(RestoreReads):
    """The real restore reads, noting each one: (what, where it started, rows read)."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self.reads: list[tuple[str, object, int]] = []

    def restorable_page(self, after: str, limit: int) -> RestorablePage:
        page = super().restorable_page(after, limit)
        self.reads.append(("heartbeats", after, page.rows))
        return page

    def queued_page(self, after_id: int, limit: int) -> QueuedPage:
        page = super().queued_page(after_id, limit)
        self.reads.append(("messages", after_id, page.rows))
        return page


class CountingStore(Store):
    """The real store whose restore part counts its reads."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.restore = CountingReads(self.restore.database)
        self.reads = self.restore.reads
        self.taken = 0

    def take_rows(self) -> int:
        """Rows read since the last call."""
        rows = sum(n for _, _, n in self.reads[self.taken :])
        self.taken = len(self.reads)
        return rows


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Beat:
    """A beat replica: its own Runtime over a counting store, sharing the test's Redis."""

    core: BeatCore
    store: CountingStore
    clock: Clock

    def tick(self) -> tuple[float, int]:
        """One tick: the seconds it asks to wait and the SQL rows its restore step read."""
        pause = self.core.tick()
        return pause, self.store.take_rows()


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[Gateway]:
    gw = Gateway(gateway_settings(tmp_path, redis_url, redis_ns, restore_page=PAGE), redis_url)
    yield gw
    gw.close()


def beat_of(gw: Gateway, clock: Clock | None = None) -> Beat:
    store = CountingStore(gw.store.engine)
    rt = Runtime(settings=gw.settings, store=store, client=gw.rt.client, clock=clock or Clock())
    return Beat(BeatCore(rt, gw.dispatcher), store, rt.clock)  # type: ignore[arg-type]


def heartbeats(gw: Gateway, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        sid = gw.session()
        gw.heartbeat(sid, seconds=600)
        ids.append(sid)
    return ids


def queued(gw: Gateway, sid: str, count: int) -> list[int]:
    return [
        gw.store.messages.add_message(
            sid, role="user", kind="user", text=f"m{i}", now=utcnow(), state=MessageState.QUEUED
        ).id
        for i in range(count)
    ]


def wipe_index(gw: Gateway, ids: list[str]) -> None:
    for sid in ids:
        gw.rt.index.remove(sid)


def true_due_ms(gw: Gateway, sid: str) -> int:
    due = gw.store.heartbeats.heartbeat_status(sid, utcnow()).next_due
    assert due is not None
    return to_ms(due)


def tick_until_complete(beat: Beat, most: int) -> list[tuple[float, int]]:
    """Ticks (pause, rows) up to and including the one that completes the sweep."""
    ticks = []
    sweep = RestoreSweep(beat.core.rt.client, beat.core.rt.keys)
    for _ in range(most):
        ticks.append(beat.tick())
        if sweep.read().phase is None and not sweep.read().lost:
            return ticks
    raise AssertionError(f"the sweep did not complete in {most} ticks: {ticks}")


@pytest.mark.parametrize("size", [12, 36])
def test_each_tick_reads_at_most_a_page_and_a_sweep_covers_everything(
    fleet: Gateway, size: int
) -> None:
    gw = fleet
    ids = heartbeats(gw, size)
    messages = queued(gw, ids[0], 3) + queued(gw, ids[1], 4)
    wipe_index(gw, ids)
    beat = beat_of(gw)

    ticks = tick_until_complete(beat, most=size)

    rows = [n for _, n in ticks]
    assert max(rows) == PAGE  # bounded by the page, whatever the fleet's size
    assert sum(rows) == size + len(messages)  # every row once
    assert len(ticks) >= math.ceil((size + len(messages)) / PAGE)
    for sid in ids:
        assert gw.rt.index.due_ms(sid) == true_due_ms(gw, sid)
    inboxes = [gw.rt.client.lrange(gw.rt.keys.inbox(sid), 0, -1) for sid in ids[:2]]
    assert inboxes == [[str(m) for m in messages[:3]], [str(m) for m in messages[3:]]]
    # A rebuild (a new namespace has no epoch) asks for the next tick without a pause.
    assert [pause for pause, _ in ticks[:-1]] == [MIN_SLEEP] * (len(ticks) - 1)
    # Complete: nothing is read until the next pass is due, one interval after this one began.
    assert beat.tick()[1] == 0
    beat.clock.now += timedelta(seconds=gw.settings.restore_interval)
    assert beat.tick()[1] == PAGE


def test_a_restarted_beat_continues_the_sweep_where_it_stood(fleet: Gateway) -> None:
    gw = fleet
    ids = heartbeats(gw, 12)
    wipe_index(gw, ids)
    first = beat_of(gw)
    assert [first.tick()[1], first.tick()[1]] == [PAGE, PAGE]

    restarted = beat_of(gw)  # a new process: a new lease token, nothing in memory
    tick_until_complete(restarted, most=5)

    reads = [(after, n) for what, after, n in restarted.store.reads if what == "heartbeats"]
    assert not [r for r in restarted.store.reads if r[0] == "messages"]  # a phase already done
    assert reads[0] == (sorted(ids)[2 * PAGE - 1], 12 - 2 * PAGE)  # after the old cursor
    assert all(gw.rt.index.due_ms(sid) == true_due_ms(gw, sid) for sid in ids)


def test_flushdb_rebuilds_everything_at_once_without_waiting_for_the_interval(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    private_redis.start()
    gw = Gateway(
        gateway_settings(tmp_path, private_redis.url, "flushed", restore_page=4), private_redis.url
    )
    try:
        ids = heartbeats(gw, 10)
        gw.store.ledger.claim_fence(ids[3], 7, utcnow())
        message = queued(gw, ids[5], 1)[0]
        beat = beat_of(gw)
        tick_until_complete(beat, most=10)
        assert beat.tick()[1] == 0  # complete: the next pass is one interval away
        assert gw.rt.client.flushdb()

        beat.clock.now += timedelta(milliseconds=1)  # long before the interval is over
        ticks = tick_until_complete(beat, most=10)

        assert len(ticks) == math.ceil(11 / 4)
        assert [pause for pause, _ in ticks[:-1]] == [MIN_SLEEP] * (len(ticks) - 1)
        assert all(gw.rt.index.due_ms(sid) == true_due_ms(gw, sid) for sid in ids)
        assert gw.rt.gate.fence(ids[3]) >= 7  # fences never go back, even across the loss
        assert all(gw.rt.gate.is_idle(sid) for sid in ids if sid != ids[5])
        assert gw.rt.gate.backlog(ids[5]) == 1
        assert gw.rt.client.lrange(gw.rt.keys.inbox(ids[5]), 0, -1) == [str(message)]
    finally:
        gw.close()


def test_two_beats_share_one_sweep_and_one_runs_a_step_at_a_time(fleet: Gateway) -> None:
    gw = fleet
    ids = heartbeats(gw, 14)
    wipe_index(gw, ids)
    clock = Clock()
    one, two = beat_of(gw, clock), beat_of(gw, clock)

    # While one holds the lease (its step under way), the other reads nothing.
    assert one.core.restorer.sweep.acquire(one.core.restorer.token, 10_000)
    assert two.tick()[1] == 0
    assert one.core.restorer.sweep.release(one.core.restorer.token)

    rows = []
    for _ in range(5):
        rows += [one.tick()[1], two.tick()[1]]
    assert sum(rows) == 14  # one sweep between them, not one each
    assert max(rows) <= PAGE
    assert all(gw.rt.index.due_ms(sid) == true_due_ms(gw, sid) for sid in ids)


def test_a_step_whose_lease_lapsed_records_nothing(fleet: Gateway) -> None:
    rt = fleet.rt
    slow, other = RestoreSweep(rt.client, rt.keys), RestoreSweep(rt.client, rt.keys)
    assert slow.acquire("slow", 10_000)
    assert not other.acquire("other", 10_000)
    rt.client.delete(rt.keys.restore_lease())  # the slow step's lease ran out
    assert other.acquire("other", 10_000)
    assert not slow.commit("slow", {"phase": "heartbeats", "cursor": "zzz"})
    assert other.commit("other", {"phase": "heartbeats", "cursor": "s1", "started": 5})
    assert (rt.client.exists(rt.keys.restore_lease()), other.read().cursor) == (0, "s1")


def test_a_regular_pass_spreads_its_steps_and_repairs_what_went_missing(
    fleet: Gateway,
) -> None:
    gw = fleet
    ids = heartbeats(gw, 12)
    beat = beat_of(gw)
    tick_until_complete(beat, most=10)  # the first pass: 12 rows in pages of 5, 3 steps
    lost = ids[7]
    gw.rt.index.remove(lost)
    gw.rt.client.delete(gw.rt.keys.fence(lost))
    gw.store.ledger.claim_fence(lost, 4, utcnow())
    interval = timedelta(seconds=gw.settings.restore_interval)

    beat.clock.now += interval
    assert beat.tick()[1] == PAGE  # a new pass begins with a step
    assert beat.tick()[1] == 0  # then waits: spread over the interval like the last one
    beat.clock.now += interval / 2
    ticks = tick_until_complete(beat, most=5)

    assert [rows for _, rows in ticks] == [PAGE, 12 - 2 * PAGE]
    assert all(pause != MIN_SLEEP for pause, _ in ticks)  # not a rebuild: no hurry
    assert gw.rt.index.due_ms(lost) == true_due_ms(gw, lost)
    assert gw.rt.gate.fence(lost) >= 4  # a missing entry's session gets its fence back too
