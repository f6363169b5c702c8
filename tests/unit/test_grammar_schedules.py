"""Grammar tables: intervals, cron and schedules (next fire times across DST included)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from hbgw.core.errors import CronError, IntervalError
from hbgw.sessions.grammar import (
    CronSchedule,
    IntervalSchedule,
    cron_next,
    format_interval,
    next_fire,
    parse_cron,
    parse_interval,
)

UNIT_SPELLINGS = {
    1: ["s", "sec", "secs", "second", "seconds"],
    60: ["m", "min", "mins", "minute", "minutes"],
    3600: ["h", "hr", "hrs", "hour", "hours"],
    86400: ["d", "day", "days"],
}
ALL_UNITS = [(size, unit) for size, units in UNIT_SPELLINGS.items() for unit in units]


def literally(text: str) -> str:
    return re.escape(text)


# -- intervals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (f"{every}3{space}{spelling}", 3 * size)
        for size, unit in ALL_UNITS
        for spelling in (unit, unit.upper())
        for every in ("", "every ", "EVERY  ")
        for space in ("", " ", "\t")
    ],
)
def test_every_unit_spelling(text: str, seconds: int) -> None:
    assert parse_interval(text, minimum=1) == seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10m", 600),
        ("10 m", 600),
        ("90 minutes", 5400),
        ("every 90 minutes", 5400),
        ("1.5h", 5400),
        ("1.5 hours", 5400),
        ("0.5m", 30),
        (".5h", 1800),
        ("2.25m", 135),
        ("  every   10   m  ", 600),
        ("every\n10m", 600),
        ("1d", 86400),
        ("366d", 366 * 86400),
        ("007s", 7),
    ],
)
def test_interval_values(text: str, seconds: int) -> None:
    assert parse_interval(text, minimum=1) == seconds


@pytest.mark.parametrize(
    "text",
    [
        "10",
        "m",
        "10 parsecs",
        "10ms",
        "ten minutes",
        "1e3s",
        "1e400s",
        "inf s",
        "nan m",
        "1.5.2m",
        "1,5h",
        "5.m",
        "every",
        "every every 10m",
        "10m 5s",
        "10m check",
        "١٠m",  # Arabic-Indic digits are not accepted as numbers
        "10 minutes!",
    ],
)
def test_interval_errors_explain_the_forms(text: str) -> None:
    with pytest.raises(IntervalError, match="is not an interval — write a number and a unit"):
        parse_interval(text)


def test_empty_interval_says_none_was_given() -> None:
    with pytest.raises(IntervalError, match="No interval was given — write a number and a unit"):
        parse_interval("  ")


@pytest.mark.parametrize("text", ["59s", "0.5m", "0s", "0m", "-5m", "1s", "every 30 seconds"])
def test_below_minimum_is_an_error_never_a_clamp(text: str) -> None:
    with pytest.raises(IntervalError) as info:
        parse_interval(text)
    assert str(info.value) == "Interval too small — minimum is 60s."


@pytest.mark.parametrize(
    ("minimum", "shown"),
    [(300, "5m"), (90, "90s"), (59.5, "60s"), (1, "1s"), (0, "1s"), (3600, "1h")],
)
def test_minimum_message_names_the_minimum(minimum: float, shown: str) -> None:
    with pytest.raises(IntervalError) as info:
        parse_interval("0.5s", minimum=minimum)
    assert str(info.value) == f"Interval too small — minimum is {shown}."


def test_minimum_itself_is_accepted() -> None:
    assert parse_interval("60s") == 60
    assert parse_interval("1m") == 60
    assert parse_interval("5m", minimum=300) == 300


@pytest.mark.parametrize("text", ["1.5s", "1.01m", "1.0001h", "0.001d"])
def test_fractions_of_a_second_are_rejected(text: str) -> None:
    with pytest.raises(IntervalError, match=r"^Intervals are counted in whole seconds"):
        parse_interval(text, minimum=1)


@pytest.mark.parametrize("text", ["367d", "99999999999999999999999999d", "9" * 35 + "s"])
def test_huge_intervals_are_errors(text: str) -> None:
    with pytest.raises(IntervalError, match=r"too large|too long"):
        parse_interval(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (86400, "1d"),
        (5400, "90m"),
        (3600, "1h"),
        (90, "90s"),
        (120, "2m"),
        (60, "1m"),
        (1, "1s"),
        (172800, "2d"),
        (90000, "25h"),
        (86401, "86401s"),
    ],
)
def test_format_interval(seconds: int, text: str) -> None:
    assert format_interval(seconds) == text
    assert parse_interval(text, minimum=1) == seconds


# -- cron -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tz", "expr", "zone"),
    [
        ("0 9 * * 1-5", None, "0 9 * * 1-5", "UTC"),
        ("  0   9 * *   1-5 ", None, "0 9 * * 1-5", "UTC"),
        ("TZ=Asia/Tokyo 0 9 * * *", None, "0 9 * * *", "Asia/Tokyo"),
        ("tz=asia/tokyo 0 9 * * *", None, "0 9 * * *", "Asia/Tokyo"),
        ("CRON_TZ=Europe/Paris @daily", None, "@daily", "Europe/Paris"),
        ("TZ=Asia/Tokyo 0 9 * * *", "Asia/Tokyo", "0 9 * * *", "Asia/Tokyo"),
        ("*/15 * * * *", "Europe/Berlin", "*/15 * * * *", "Europe/Berlin"),
        ("0 9 * * *", "utc", "0 9 * * *", "UTC"),
        ("@hourly", None, "@hourly", "UTC"),
        ("@DAILY", None, "@daily", "UTC"),
        ("@weekly", None, "@weekly", "UTC"),
        ("@monthly", None, "@monthly", "UTC"),
        ("@yearly", None, "@yearly", "UTC"),
        ("@annually", None, "@annually", "UTC"),
        ("0 9 * * MON-FRI", None, "0 9 * * mon-fri", "UTC"),
        ("0 0 1 JAN,jul *", None, "0 0 1 jan,jul *", "UTC"),
        ("0 0 * * fri-sun", None, "0 0 * * fri-sun", "UTC"),
        ("5,10-20/5 0-23 1-31 1-12 0-7", None, "5,10-20/5 0-23 1-31 1-12 0-7", "UTC"),
        ("5/15 * * * *", None, "5/15 * * * *", "UTC"),
        ("0 0 29 2 *", None, "0 0 29 2 *", "UTC"),
        ("0 0 31 2 mon", None, "0 0 31 2 mon", "UTC"),  # day-of-week OR day-of-month
        ("*/60 */24 */31 */12 */7", None, "*/60 */24 */31 */12 */7", "UTC"),
    ],
)
def test_cron_forms(text: str, tz: str | None, expr: str, zone: str) -> None:
    assert parse_cron(text, tz=tz) == CronSchedule(expr=expr, timezone=zone)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "1-2-3 * * * *",
            "The minute field '1-2-3' is not valid: a range has one dash (like 1-5).",
        ),
        ("61 * * * *", "The minute field '61' is not valid: 61 is outside 0–59."),
        (
            "*/0 * * * *",
            "The minute field '*/0' is not valid: a step must be at least 1 (like */15).",
        ),
        ("0 24 * * *", "The hour field '24' is not valid: 24 is outside 0–23."),
        ("0 0 0 * *", "The day-of-month field '0' is not valid: 0 is outside 1–31."),
        ("0 0 32 * *", "The day-of-month field '32' is not valid: 32 is outside 1–31."),
        ("0 0 * 13 *", "The month field '13' is not valid: 13 is outside 1–12."),
        ("0 0 * * 8", "The day-of-week field '8' is not valid: 8 is outside 0–7."),
        ("100 * * * *", "The minute field '100' is not valid: 100 is outside 0–59."),
        ("5-1 * * * *", "The minute field '5-1' is not valid: a range goes from low to high"),
        ("0 0 * * sat-mon", "The day-of-week field 'sat-mon' is not valid: a range goes from low"),
        ("-1 * * * *", "The minute field '-1' is not valid: a range has a value on each side"),
        ("1- * * * *", "The minute field '1-' is not valid: a range has a value on each side"),
        ("1,,2 * * * *", "The minute field '1,,2' is not valid: a list needs a value between"),
        ("1, * * * *", "The minute field '1,' is not valid: a list needs a value between"),
        ("*/x * * * *", "The minute field '*/x' is not valid: a step is a whole number"),
        ("*/5/5 * * * *", "The minute field '*/5/5' is not valid: a step is a whole number"),
        ("/5 * * * *", "The minute field '/5' is not valid: a step needs something to step"),
        ("*/61 * * * *", "The minute field '*/61' is not valid: a step can be at most 60."),
        ("0 */25 * * *", "The hour field '*/25' is not valid: a step can be at most 24."),
        ("0 x * * *", "The hour field 'x' is not valid: 'x' is not a value here; the values"),
        ("0 0 * foo *", "The month field 'foo' is not valid: 'foo' is not a value here; use 1–12"),
        ("0 0 * * funday", "The day-of-week field 'funday' is not valid: 'funday' is not a value"),
        ("mon * * * *", "The minute field 'mon' is not valid: 'mon' is not a value here"),
        ("0 0 L * *", "The day-of-month field 'l' is not valid"),
        ("0 0 * * 1#2", "The day-of-week field '1#2' is not valid"),
        ("H * * * *", "The minute field 'h' is not valid"),
        ("0 0 ? * *", "The day-of-month field '?' is not valid"),
        ("0 0 * *", "A cron schedule needs five fields (minute hour day-of-month month day-of-wee"),
        ("", "A cron schedule needs five fields"),
        ("0 0 0 * * * *", "A cron schedule needs five fields"),
        ("* * * * * *", "has six fields, but a seconds field is not supported"),
        ("@sometimes", "'@sometimes' is not a cron alias — use @hourly, @daily, @weekly"),
        ("@midnight", "@midnight is not supported — use @hourly"),
        ("@reboot", "@reboot is not supported"),
        ("0 0 31 2 *", "The schedule '0 0 31 2 *' never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("0 0 30 feb *", "never fires"),
    ],
)
def test_cron_errors_name_the_field(text: str, message: str) -> None:
    with pytest.raises(CronError, match=literally(message)):
        parse_cron(text)


@pytest.mark.parametrize(
    ("text", "tz", "message"),
    [
        (
            "0 9 * * *",
            "Mars/Base",
            "Unknown timezone 'Mars/Base' — use an IANA name such as Europe/Paris.",
        ),
        ("TZ=Mars/Base 0 9 * * *", None, "Unknown timezone 'Mars/Base'"),
        ("0 9 * * *", "", "Unknown timezone ''"),
        ("0 9 * * *", "../etc/passwd", "Unknown timezone '../etc/passwd'"),
        ("0 9 * * *", "Europe", "Unknown timezone 'Europe'"),
        ("TZ=Asia/Tokyo 0 9 * * *", "Europe/Paris", "The timezone is given twice"),
    ],
)
def test_cron_timezone_errors(text: str, tz: str | None, message: str) -> None:
    with pytest.raises(CronError, match=literally(message)):
        parse_cron(text, tz=tz)


@pytest.mark.parametrize(
    ("schedule", "text"),
    [
        (IntervalSchedule(600), "every 10m"),
        (IntervalSchedule(5400), "every 90m"),
        (CronSchedule("0 9 * * 1-5", "Asia/Tokyo"), "cron 0 9 * * 1-5 (Asia/Tokyo)"),
        (CronSchedule("@hourly"), "cron @hourly (UTC)"),
    ],
)
def test_describe(schedule: IntervalSchedule | CronSchedule, text: str) -> None:
    assert schedule.describe() == text


# -- next fire ------------------------------------------------------------------------------


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, us, tzinfo=UTC)


@pytest.mark.parametrize(
    ("schedule", "anchor", "expected"),
    [
        (IntervalSchedule(600), utc(2026, 3, 28, 12), utc(2026, 3, 28, 12, 10)),
        (IntervalSchedule(60), datetime(2026, 1, 1), utc(2026, 1, 1, 0, 1)),  # naive is UTC
        (
            IntervalSchedule(3600),
            datetime(2026, 1, 1, 9, tzinfo=timezone(timedelta(hours=9))),
            utc(2026, 1, 1, 1),
        ),
        # Strictly after the anchor, also when the anchor is itself an occurrence.
        (CronSchedule("@hourly"), utc(2026, 1, 1, 5), utc(2026, 1, 1, 6)),
        (CronSchedule("@hourly"), utc(2026, 1, 1, 5, 0, 0, 1), utc(2026, 1, 1, 6)),
        (CronSchedule("@daily"), utc(2026, 1, 1, 5), utc(2026, 1, 2)),
        (CronSchedule("@weekly"), utc(2026, 1, 1), utc(2026, 1, 4)),  # Sunday
        (CronSchedule("@monthly"), utc(2026, 1, 15), utc(2026, 2, 1)),
        (CronSchedule("@yearly"), utc(2026, 1, 15), utc(2027, 1, 1)),
        (CronSchedule("0 9 * * 1-5", "Asia/Tokyo"), utc(2026, 1, 2, 1), utc(2026, 1, 5, 0)),
        (CronSchedule("0 0 29 2 *"), utc(2026, 3, 1), utc(2028, 2, 29)),
        (CronSchedule("0 0 * * 7-7"), utc(2026, 1, 1), utc(2026, 1, 4)),  # Sunday only
        (CronSchedule("0 0 * * fri-sun"), utc(2026, 1, 3, 1), utc(2026, 1, 4)),
        (CronSchedule("0 0 31 2 mon"), utc(2026, 1, 1), utc(2026, 2, 2)),  # a Monday in February
        # Berlin 09:00 is 08:00 UTC in winter and 07:00 UTC from 29 March 2026 (CEST).
        (CronSchedule("0 9 * * *", "Europe/Berlin"), utc(2026, 3, 27, 12), utc(2026, 3, 28, 8)),
        (CronSchedule("0 9 * * *", "Europe/Berlin"), utc(2026, 3, 28, 12), utc(2026, 3, 29, 7)),
        # A skipped wall time (02:30 on 29 March) fires when the gap ends, 03:00 CEST.
        (CronSchedule("30 2 * * *", "Europe/Berlin"), utc(2026, 3, 28, 12), utc(2026, 3, 29, 1)),
        (CronSchedule("30 2 * * *", "Europe/Berlin"), utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)),
        # New York falls back on 1 November 2026: 01:30 happens twice, a fixed time fires once.
        (
            CronSchedule("30 1 * * *", "America/New_York"),
            utc(2026, 10, 31, 12),
            utc(2026, 11, 1, 5, 30),
        ),
        (
            CronSchedule("30 1 * * *", "America/New_York"),
            utc(2026, 11, 1, 5, 30),
            utc(2026, 11, 2, 6, 30),
        ),
        # ...but an hourly schedule fires in both 01:00 hours (EDT, then EST).
        (
            CronSchedule("0 * * * *", "America/New_York"),
            utc(2026, 11, 1, 4, 30),
            utc(2026, 11, 1, 5),
        ),
        (CronSchedule("0 * * * *", "America/New_York"), utc(2026, 11, 1, 5), utc(2026, 11, 1, 6)),
        (
            CronSchedule("0 * * * *", "America/New_York"),
            utc(2026, 11, 1, 5, 15),
            utc(2026, 11, 1, 6),
        ),
        (CronSchedule("0 * * * *", "America/New_York"), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)),
        (
            CronSchedule("*/30 * * * *", "America/New_York"),
            utc(2026, 11, 1, 5, 45),
            utc(2026, 11, 1, 6),
        ),
        # Lord Howe moves by 30 minutes: on 4 October 2026 02:00 (+10:30) becomes 02:30 (+11),
        # so the hourly 02:00 fires at 02:30, then 03:00 as usual.
        (
            CronSchedule("0 * * * *", "Australia/Lord_Howe"),
            utc(2026, 10, 3, 14, 45),
            utc(2026, 10, 3, 15, 30),
        ),
        (
            CronSchedule("0 * * * *", "Australia/Lord_Howe"),
            utc(2026, 10, 3, 15, 30),
            utc(2026, 10, 3, 16, 0),
        ),
    ],
)
def test_next_fire(
    schedule: IntervalSchedule | CronSchedule, anchor: datetime, expected: datetime
) -> None:
    fired = next_fire(schedule, anchor)
    assert fired == expected
    assert fired.utcoffset() == timedelta(0)


def test_consecutive_fires_walk_forward_through_a_dst_change() -> None:
    schedule = parse_cron("*/20 0-3 * * *", tz="America/New_York")
    moment, seen = utc(2026, 11, 1, 3), []
    for _ in range(16):
        moment = cron_next(schedule, moment)
        seen.append(moment)
    assert seen == sorted(set(seen))  # strictly increasing, no repeats
    local = [m.astimezone(ZoneInfo(schedule.timezone)).strftime("%H:%M%z") for m in seen]
    # Both 01:xx hours fire (minute field starts with *), 00:xx, 02:xx and 03:xx once each.
    assert local[:9] == [
        "00:00-0400",
        "00:20-0400",
        "00:40-0400",
        "01:00-0400",
        "01:20-0400",
        "01:40-0400",
        "01:00-0500",
        "01:20-0500",
        "01:40-0500",
    ]
    assert local[9:12] == ["02:00-0500", "02:20-0500", "02:40-0500"]
