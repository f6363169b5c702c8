"""Jitter: bounded, deterministic across processes, kept once per phase, and off with exact."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from support.seed import T0

from hbgw.sessions import heartbeat as hb
from hbgw.sessions.grammar import CronSchedule, GrammarLimits, IntervalSchedule, Schedule
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.heartbeat_commands import handle_slash
from hbgw.sessions.jitter import MAX_SECONDS, jitter_offset
from hbgw.sessions.store import Store

SEEDS = [f"s{n:015x}" for n in range(2000)]


def state(schedule: Schedule, seed: str, *, exact: bool = False) -> hb.HeartbeatState:
    return hb.set_heartbeat(
        None,
        schedule=schedule,
        schedule_text="",
        prompt="p",
        origin_chat="C1",
        origin_thread=None,
        now=T0,
        policy=Policy(exact=exact),
        jitter_seed=seed,
    )


@pytest.mark.parametrize(("period", "cap"), [(600, 60), (3600, 300), (86400, 300), (5, 0)])
def test_offsets_stay_within_ten_percent_and_five_minutes(period: int, cap: int) -> None:
    offsets = [jitter_offset(seed, period).total_seconds() for seed in SEEDS]
    assert min(offsets) >= 0 and max(offsets) <= cap <= MAX_SECONDS
    if cap:
        assert len(set(offsets)) > cap // 2  # spread, not bunched


def test_the_same_session_gets_the_same_offset_in_another_process() -> None:
    code = "from sessions.jitter import jitter_offset; print(jitter_offset('s-abc', 3600).seconds)"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(other.stdout) == jitter_offset("s-abc", 3600).seconds


def test_an_interval_keeps_its_phase_after_a_fire() -> None:
    first = state(IntervalSchedule(3600), "s-phase")
    due = first.next_due()
    assert due is not None and T0 + timedelta(hours=1) < due <= T0 + timedelta(hours=1, minutes=5)
    fired = hb.reserve(first, due)
    assert fired.next_due() == due + timedelta(hours=1)  # the offset is not added again
    later = due + timedelta(minutes=10)
    resumed = hb.resume(hb.pause(fired, later), later)  # a new anchor: staggered again
    assert resumed.next_due() == later + timedelta(hours=1) + jitter_offset("s-phase", 3600)


def test_cron_heartbeats_at_the_top_of_the_hour_are_staggered() -> None:
    hourly = CronSchedule("@hourly")
    dues = {state(hourly, seed).next_due() for seed in SEEDS[:500]}
    top = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
    assert all(d is not None and top <= d <= top + timedelta(minutes=5) for d in dues)
    assert len(dues) > 200
    fired = hb.reserve(state(hourly, "s-cron"), top + timedelta(seconds=90))
    nxt = fired.next_due()
    assert nxt is not None and top + timedelta(hours=1) <= nxt <= top + timedelta(
        hours=1, minutes=5
    )


def test_exact_opts_out() -> None:
    assert state(IntervalSchedule(3600), "s-x", exact=True).next_due() == T0 + timedelta(hours=1)
    top = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
    assert state(CronSchedule("@hourly"), "s-x", exact=True).next_due() == top


def test_chat_commands_are_jittered_unless_exact(store: Store) -> None:
    limits = GrammarLimits()
    sid = store.sessions.create_session(platform="slack", chat="C1", thread=None, now=T0).id
    handle_slash(store, sid, "/heartbeat every 1h exact check", T0, limits)
    assert store.heartbeats.heartbeat_status(sid, T0).next_due == T0 + timedelta(hours=1)
    handle_slash(store, sid, "/heartbeat every 1h check", T0, limits)
    jittered = store.heartbeats.heartbeat_status(sid, T0).next_due
    expected = T0 + timedelta(hours=1) + jitter_offset(sid, 3600)
    assert jittered == expected
    assert store.heartbeats.get_heartbeat(sid) == store.heartbeats.get_heartbeat(
        sid
    )  # read back the same


def test_every_policy_reads_back_from_sql(store: Store) -> None:
    from datetime import time

    from hbgw.sessions.grammar.hours import ActiveHours

    sid = store.sessions.create_session(platform="slack", chat="C1", thread=None, now=T0).id
    hours = ActiveHours(time(22), time(6), "Europe/Paris", weekdays=True)
    policy = Policy(hours=hours, exact=True, lasts=7 * 86400, times=20)
    set_state = store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(900),
        schedule_text="every 15m hours 22:00-06:00 Europe/Paris weekdays exact for 7d times 20",
        prompt="night watch",
        now=T0,
        policy=policy,
    )
    read = store.heartbeats.get_heartbeat(sid)
    assert read is not None
    assert read.policy == Policy(hours=hours, exact=True, times=20)  # ``for`` lives on as ends_at
    assert read.ends_at == T0 + timedelta(days=7) == set_state.ends_at
    assert read.next_due() == set_state.next_due()
