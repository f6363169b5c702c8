"""The heartbeat state machine's less travelled rules, pure (time is an argument): what a late
fire reports as missed (interval and cron, the cap), a resume of an active heartbeat, a refund
giving the count and the anchor back, and a stored row with no schedule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import croniter  # noqa: F401  # at collection: its import runs `file` (platform.architecture)
import pytest

from hbgw.core.errors import InvalidState
from hbgw.sessions import heartbeat as hb
from hbgw.sessions.grammar import CronSchedule, IntervalSchedule, Schedule
from hbgw.sessions.states import HeartbeatStatus

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EVERY_5_MIN = CronSchedule(expr="*/5 * * * *")


def heartbeat(schedule: Schedule, now: datetime = T0) -> hb.HeartbeatState:
    """A heartbeat set at ``now`` without jitter (no seed): due exactly on its schedule."""
    return hb.set_heartbeat(
        None,
        schedule=schedule,
        schedule_text="",
        prompt="check CI",
        origin_chat="C1",
        origin_thread=None,
        now=now,
    )


def test_a_heartbeat_not_yet_due_missed_nothing() -> None:
    state = heartbeat(IntervalSchedule(600))
    assert state.missed(T0 + timedelta(minutes=9, seconds=59)) == 0
    assert state.missed(T0 + timedelta(minutes=10)) == 0  # due now: the fire serves it


def test_a_paused_heartbeat_missed_nothing_however_long_ago_it_was_due() -> None:
    paused = hb.pause(heartbeat(IntervalSchedule(600)), T0)
    assert paused.next_due() is None
    assert paused.missed(T0 + timedelta(days=3)) == 0


def test_a_late_cron_fire_counts_each_occurrence_it_skipped() -> None:
    state = heartbeat(EVERY_5_MIN)
    assert state.next_due() == T0 + timedelta(minutes=5)
    assert state.missed(T0 + timedelta(minutes=5)) == 0
    assert state.missed(T0 + timedelta(minutes=9, seconds=59)) == 0
    assert state.missed(T0 + timedelta(minutes=10)) == 1  # an occurrence exactly at now counts
    assert state.missed(T0 + timedelta(minutes=21)) == 3  # 12:10, 12:15, 12:20


def test_a_late_cron_fire_stops_counting_at_the_cap() -> None:
    """Missed is a metric only: a years-late every-minute cron counts at most the cap."""
    state = heartbeat(CronSchedule(expr="* * * * *"))
    assert state.missed(T0 + timedelta(days=30)) == hb.MAX_MISSED_COUNTED


def test_a_late_interval_fire_counts_whole_intervals_only() -> None:
    state = heartbeat(IntervalSchedule(600))
    assert state.missed(T0 + timedelta(minutes=29, seconds=59)) == 1
    assert state.missed(T0 + timedelta(minutes=30)) == 2


def test_resuming_an_active_heartbeat_is_refused_and_changes_nothing() -> None:
    state = heartbeat(IntervalSchedule(600))
    with pytest.raises(InvalidState, match="already active"):
        hb.resume(state, T0 + timedelta(minutes=3))
    resumed = hb.resume(hb.pause(state, T0), T0 + timedelta(minutes=3))
    with pytest.raises(InvalidState, match="already active"):
        hb.resume(resumed, T0 + timedelta(minutes=4))


def test_a_refund_gives_back_the_count_and_the_previous_anchor() -> None:
    """A reservation that never reached the agent is given back as if it never happened: the
    count, the anchor and the last fire time are the ones before it, so it is due again."""
    state = heartbeat(IntervalSchedule(600))
    fired_at = T0 + timedelta(minutes=12)
    reserved = hb.reserve(state, fired_at)
    assert (reserved.fire_count, reserved.anchor, reserved.last_fired) == (1, fired_at, fired_at)
    refunded = hb.refund(reserved, prev_anchor=state.anchor, prev_last_fired=state.last_fired)
    assert (refunded.fire_count, refunded.anchor, refunded.last_fired) == (0, T0, None)
    assert refunded.next_due() == state.next_due()
    assert refunded.is_due(fired_at)
    assert refunded.generation == state.generation  # a refund is no change of configuration


def test_a_refund_never_takes_the_count_below_zero() -> None:
    state = heartbeat(IntervalSchedule(600))
    refunded = hb.refund(state, prev_anchor=T0, prev_last_fired=None)
    assert refunded.fire_count == 0


def test_a_stored_schedule_reads_back_as_it_was_written() -> None:
    cron = CronSchedule(expr="*/5 * * * *", timezone="Europe/Paris")
    for schedule in (IntervalSchedule(600), cron):
        assert hb.schedule_from_columns(*hb.schedule_columns(schedule)) == schedule
    assert hb.schedule_from_columns(None, "*/5 * * * *", None) == EVERY_5_MIN  # UTC by default


def test_a_stored_row_with_neither_interval_nor_cron_is_refused() -> None:
    with pytest.raises(ValueError, match="neither an interval nor a cron"):
        hb.schedule_from_columns(None, None, None)


def test_statuses_stay_what_the_transitions_made_them() -> None:
    state = heartbeat(IntervalSchedule(600))
    assert state.status == HeartbeatStatus.ACTIVE
    assert hb.clear(state, T0).status == HeartbeatStatus.CLEARED
