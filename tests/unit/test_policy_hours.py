"""Active hours in the next due time, at the edges: start, end, midnight, DST, weekdays."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

from hbgw.core.errors import GrammarError
from hbgw.sessions import heartbeat as hb
from hbgw.sessions.grammar import IntervalSchedule, SetHeartbeat, parse_command
from hbgw.sessions.grammar.hours import ActiveHours
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.replies import status_reply
from hbgw.sessions.store.heartbeat_records import HeartbeatStatusView, policy_json

PARIS = "Europe/Paris"
OFFICE = ActiveHours(time(9), time(18), PARIS)
NIGHT = ActiveHours(time(22), time(6), PARIS)


def utc(year: int, month: int, day: int, hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def state(
    hours: ActiveHours, now: datetime, *, seconds: int = 900, exact: bool = True
) -> hb.HeartbeatState:
    return hb.set_heartbeat(
        None,
        schedule=IntervalSchedule(seconds),
        schedule_text="",
        prompt="check CI",
        origin_chat="C1",
        origin_thread=None,
        now=now,
        policy=Policy(hours=hours, exact=exact),
        jitter_seed="s-hours",
    )


def test_exactly_at_start_is_inside_and_exactly_at_end_is_outside() -> None:
    # December: Paris is UTC+1, so 09:00 is 08:00 UTC and 18:00 is 17:00 UTC.
    assert OFFICE.next_open(utc(2026, 12, 1, 8, 0)) == utc(2026, 12, 1, 8, 0)
    assert OFFICE.next_open(utc(2026, 12, 1, 16, 59, 59)) == utc(2026, 12, 1, 16, 59, 59)
    assert OFFICE.next_open(utc(2026, 12, 1, 17, 0)) == utc(2026, 12, 2, 8, 0)
    assert OFFICE.next_open(utc(2026, 12, 1, 7, 59, 59)) == utc(2026, 12, 1, 8, 0)


def test_a_window_across_midnight() -> None:
    assert NIGHT.next_open(utc(2026, 12, 1, 21, 0)) == utc(2026, 12, 1, 21, 0)  # 22:00 local
    assert NIGHT.next_open(utc(2026, 12, 2, 4, 59)) == utc(2026, 12, 2, 4, 59)  # 05:59 local
    assert NIGHT.next_open(utc(2026, 12, 2, 5, 0)) == utc(2026, 12, 2, 21, 0)  # 06:00: closed
    assert NIGHT.next_open(utc(2026, 12, 1, 23, 30)) == utc(2026, 12, 1, 23, 30)


def test_spring_forward_a_start_that_does_not_exist_opens_at_the_jump() -> None:
    # 2026-03-29 Europe/Paris: 02:00 CET jumps to 03:00 CEST at 01:00 UTC; 02:30 never happens.
    hours = ActiveHours(time(2, 30), time(5), PARIS)
    assert hours.next_open(utc(2026, 3, 28, 23, 0)) == utc(2026, 3, 29, 1, 0)
    assert hours.next_open(utc(2026, 3, 29, 1, 0)) == utc(2026, 3, 29, 1, 0)
    assert hours.next_open(utc(2026, 3, 29, 3, 0)) == utc(2026, 3, 30, 0, 30)  # 05:00 CEST: shut


def test_fall_back_a_repeated_hour_opens_at_its_first_occurrence() -> None:
    # 2026-10-25 Europe/Paris: 03:00 CEST goes back to 02:00 CET at 01:00 UTC; 02:30 happens twice.
    hours = ActiveHours(time(2, 30), time(4), PARIS)
    assert hours.next_open(utc(2026, 10, 24, 23, 0)) == utc(2026, 10, 25, 0, 30)  # first 02:30
    assert hours.next_open(utc(2026, 10, 25, 1, 30)) == utc(2026, 10, 25, 1, 30)  # second 02:30
    assert hours.next_open(utc(2026, 10, 25, 3, 0)) == utc(2026, 10, 26, 1, 30)  # 04:00 CET: shut


def test_weekdays_skip_the_weekend_and_keep_fridays_night() -> None:
    weekdays = ActiveHours(time(9), time(18), PARIS, weekdays=True)
    friday_evening = utc(2026, 12, 4, 17, 0)  # Friday 18:00 Paris
    assert weekdays.next_open(friday_evening) == utc(2026, 12, 7, 8, 0)  # Monday 09:00
    assert weekdays.next_open(utc(2026, 12, 5, 10, 0)) == utc(2026, 12, 7, 8, 0)  # Saturday
    nights = ActiveHours(time(22), time(6), PARIS, weekdays=True)
    assert nights.next_open(utc(2026, 12, 5, 2, 0)) == utc(2026, 12, 5, 2, 0)  # Sat 03:00: Fri's
    assert nights.next_open(utc(2026, 12, 5, 21, 0)) == utc(2026, 12, 7, 21, 0)  # Sat 22:00: no


def test_a_due_time_outside_the_window_moves_to_its_start_with_an_injected_now() -> None:
    now = utc(2026, 12, 1, 16, 50)  # 17:50 Paris: due at 18:05, outside
    late = state(OFFICE, now)
    assert late.next_due() == utc(2026, 12, 2, 8, 0)
    assert late.outside_hours()
    inside = state(OFFICE, utc(2026, 12, 1, 9, 0))
    assert inside.next_due() == utc(2026, 12, 1, 9, 15) and not inside.outside_hours()


def test_status_says_next_at_the_window_start_outside_active_hours() -> None:
    now = utc(2026, 12, 1, 16, 50)
    reply = status_reply(HeartbeatStatusView("s1", state(OFFICE, now), now))
    assert "next at 09:00 tomorrow (Europe/Paris) (outside active hours)" in reply
    assert policy_json(state(OFFICE, now))["outside_active_hours"] is True


def test_a_jittered_start_stays_inside_the_window() -> None:
    due = state(OFFICE, utc(2026, 12, 1, 16, 50), exact=False).next_due()
    assert due is not None and utc(2026, 12, 2, 8, 0) <= due <= utc(2026, 12, 2, 8, 1, 30)


def test_the_grammar_reads_hours_zone_and_weekdays() -> None:
    command = parse_command("/heartbeat every 15m hours 09:00-18:00 Europe/Paris weekdays check CI")
    same = parse_command(
        "/heartbeat every 15m --tz Europe/Paris weekdays hours 09:00-18:00 check CI"
    )
    assert isinstance(command, SetHeartbeat) and isinstance(same, SetHeartbeat)
    assert command.policy.hours == same.policy.hours == ActiveHours(time(9), time(18), PARIS, True)
    assert command.prompt == same.prompt == "check CI"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("/heartbeat every 15m hours 9-18 check", "is not a window"),
        ("/heartbeat every 15m hours", "'hours' needs a window"),
        ("/heartbeat every 15m hours 09:00-18:00 Mars/Olympus check", "Mars/Olympus"),
        ("/heartbeat every 15m weekdays weekdays check", "given twice"),
    ],
)
def test_bad_hours_are_clear_errors(text: str, words: str) -> None:
    with pytest.raises(GrammarError) as raised:
        parse_command(text)
    assert words in str(raised.value)


def test_weekdays_alone_means_whole_weekdays() -> None:
    command = parse_command("/heartbeat every 1h weekdays check")
    assert isinstance(command, SetHeartbeat)
    hours = command.policy.hours
    assert hours == ActiveHours(time(0), time(0), "UTC", True)
    assert hours.next_open(utc(2026, 12, 6, 12, 0)) == utc(2026, 12, 7, 0, 0)  # Sunday → Monday


def test_a_prompt_after_the_schedule_may_start_with_for() -> None:
    command = parse_command("/heartbeat every 1h for the release, check CI")
    assert isinstance(command, SetHeartbeat)
    assert command.prompt == "for the release, check CI" and command.policy.lasts is None


def test_stored_hours_read_back() -> None:
    assert ActiveHours.from_text(NIGHT.describe()) == NIGHT
    weekdays = ActiveHours(time(9, 30), time(17), "UTC", True)
    assert ActiveHours.from_text(weekdays.describe()) == weekdays
