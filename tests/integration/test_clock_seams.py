"""The clock seam: domain code reads time once, from the injected clock, and passes it down."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from support.harness import Gateway

from hbgw.beat.core import BeatCore
from hbgw.core.clock import utcnow
from hbgw.gateway.channels.file import FileChannel, read_records
from hbgw.workers.ports import Address

FIXED = datetime(2031, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


class CountingClock:
    def __init__(self, start: datetime) -> None:
        self.now = start
        self.calls = 0

    def __call__(self) -> datetime:
        self.calls += 1
        return self.now


def test_file_channel_stamps_records_with_its_clock(tmp_path: Path) -> None:
    channel = FileChannel(tmp_path / "out.jsonl", clock=lambda: FIXED)
    address = Address(platform="slack", chat="C1", thread="T1")
    channel.send(address, "hi", session_id="s1", kind="heartbeat", delivery_key="f1")
    channel.typing(address, session_id="s1")
    records = read_records(tmp_path / "out.jsonl")
    assert [r["at"] for r in records] == [FIXED.timestamp()] * 2


def test_a_tick_reads_the_clock_once(gateway: Gateway) -> None:
    gw = gateway
    sid = gw.session()
    gw.due_now(sid)
    clock = CountingClock(utcnow())
    gw.rt.clock = clock
    gw.rt.registry.refresh("w1", gw.rt.now_ms())
    beat = BeatCore(gw.rt, gw.dispatcher)
    clock.calls = 0

    beat.tick()  # the first tick also runs a restore pass and the orphan sweep

    assert clock.calls == 1
    assert gw.rt.index.due_ms(sid) is not None  # claimed: leased into the future
    clock.now += timedelta(seconds=1)
    clock.calls = 0
    beat.tick()
    assert clock.calls == 1
