"""Grammar tables: intervals, cron, and the /heartbeat slash command."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hbgw.errors import CommandError, CronError, IntervalError
from sessions.commands import (
    Clear,
    GrammarLimits,
    Pause,
    Resume,
    SetHeartbeat,
    ShowStatus,
    is_heartbeat_command,
    parse_command,
)
from sessions.cron import parse_cron
from sessions.intervals import format_interval, parse_interval
from sessions.schedule import CronSchedule, IntervalSchedule, next_fire

UNIT_SPELLINGS = {
    1: ["s", "sec", "secs", "second", "seconds"],
    60: ["m", "min", "mins", "minute", "minutes"],
    3600: ["h", "hr", "hrs", "hour", "hours"],
    86400: ["d", "day", "days"],
}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (f"{form}2{unit}", 2 * size)
        for size, units in UNIT_SPELLINGS.items()
        for unit in units
        for form in ("", "every ")
    ]
    + [(f"2 {unit.upper()}", 2 * size) for size, units in UNIT_SPELLINGS.items() for unit in units]
    + [
        ("10m", 600),
        ("every 90 minutes", 5400),
        ("1.5h", 5400),
        ("0.5m", 30),
        (".5h", 1800),
        ("  every   10   m  ", 600),
        ("EVERY 1D", 86400),
    ],
)
def test_interval_forms(text: str, seconds: int) -> None:
    assert parse_interval(text, minimum=1) == seconds


@pytest.mark.parametrize(
    "text", ["", "10", "m", "10 parsecs", "ten minutes", "-5m", "1e3s", "1.5.2m", "every"]
)
def test_interval_errors_explain_the_forms(text: str) -> None:
    with pytest.raises(IntervalError, match="not an interval — use a number and a unit"):
        parse_interval(text)


def test_minimum_is_an_error_never_a_clamp() -> None:
    with pytest.raises(IntervalError) as info:
        parse_interval("59s")
    assert str(info.value) == "Interval too small — minimum is 60s."
    with pytest.raises(IntervalError, match="minimum is 300s"):
        parse_interval("4m", minimum=300)
    assert parse_interval("60s") == 60
    with pytest.raises(IntervalError, match="whole seconds"):
        parse_interval("1.5s", minimum=1)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5400, "90m"), (90, "90s"), (3600, "1h"), (86400, "1d"), (120, "2m"), (1, "1s")],
)
def test_format_interval(seconds: int, text: str) -> None:
    assert format_interval(seconds) == text


@pytest.mark.parametrize(
    ("text", "tz", "expr", "zone"),
    [
        ("0 9 * * 1-5", None, "0 9 * * 1-5", "UTC"),
        ("TZ=Asia/Tokyo 0 9 * * *", None, "0 9 * * *", "Asia/Tokyo"),
        ("*/15 * * * *", "Europe/Berlin", "*/15 * * * *", "Europe/Berlin"),
        ("@hourly", None, "@hourly", "UTC"),
        ("@DAILY", None, "@daily", "UTC"),
        ("@weekly", None, "@weekly", "UTC"),
        ("@monthly", None, "@monthly", "UTC"),
        ("0 0 1 jan mon", None, "0 0 1 jan mon", "UTC"),
        ("5,10-20/5 0-23 1-31 1-12 0-7", None, "5,10-20/5 0-23 1-31 1-12 0-7", "UTC"),
    ],
)
def test_cron_forms(text: str, tz: str | None, expr: str, zone: str) -> None:
    assert parse_cron(text, tz=tz) == CronSchedule(expr=expr, timezone=zone)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("1-2-3 * * * *", "The minute field '1-2-3' is not valid: a range has one dash"),
        ("61 * * * *", "The minute field '61' is out of range: allowed values are 0–59"),
        ("*/0 * * * *", "The minute field '*/0' is not valid: a step must be at least 1"),
        ("0 24 * * *", "The hour field"),
        ("0 0 0 * *", "The day-of-month field"),
        ("0 0 * 13 *", "The month field"),
        ("0 0 * * 8", "The day-of-week field"),
        ("0 0 * *", "needs five fields"),
        ("0 0 0 * * * *", "needs five fields"),
        ("@sometimes", "needs five fields"),
        ("0 x * * *", "The hour field 'x' is not valid"),
    ],
)
def test_cron_errors_name_the_field(text: str, needle: str) -> None:
    with pytest.raises(CronError, match=needle.replace("*", r"\*")):
        parse_cron(text)


def test_cron_timezone_errors() -> None:
    with pytest.raises(CronError, match="Unknown timezone 'Mars/Base'"):
        parse_cron("0 9 * * *", tz="Mars/Base")
    with pytest.raises(CronError, match="Two timezones"):
        parse_cron("TZ=Asia/Tokyo 0 9 * * *", tz="Europe/Paris")


def test_next_fire_interval_and_cron_across_dst() -> None:
    anchor = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    assert next_fire(IntervalSchedule(600), anchor) == datetime(2026, 3, 28, 12, 10, tzinfo=UTC)
    berlin = CronSchedule("0 9 * * *", "Europe/Berlin")
    # 09:00 CET is 08:00 UTC; after the switch on 29 March, 09:00 CEST is 07:00 UTC.
    assert next_fire(berlin, anchor) == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)
    assert next_fire(berlin, datetime(2026, 3, 27, 12, tzinfo=UTC)) == datetime(
        2026, 3, 28, 8, 0, tzinfo=UTC
    )
    # Strictly after the anchor.
    assert next_fire(CronSchedule("@hourly"), datetime(2026, 1, 1, 5, tzinfo=UTC)) == datetime(
        2026, 1, 1, 6, tzinfo=UTC
    )


LIMITS = GrammarLimits(min_interval=60, default_interval=300, max_prompt_chars=50)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/heartbeat", ShowStatus()),
        ("/hb", ShowStatus()),
        ("/heartbeat status", ShowStatus()),
        ("/HB STATUS", ShowStatus()),
        ("/heartbeat pause", Pause()),
        ("/heartbeat resume", Resume()),
        ("/heartbeat clear", Clear()),
        ("/heartbeat stop", Clear()),
        ("/hb off", Clear()),
        ("/heartbeat@HermesBot status", ShowStatus()),
    ],
)
def test_keywords(text: str, expected: object) -> None:
    assert parse_command(text, LIMITS) == expected


@pytest.mark.parametrize(
    ("text", "seconds", "prompt", "schedule_text"),
    [
        ("/heartbeat every 10m check CI", 600, "check CI", "every 10m"),
        ("/heartbeat 10m check CI", 600, "check CI", "10m"),
        ("/heartbeat --every 10m check CI", 600, "check CI", "--every 10m"),
        ("/heartbeat --every=1.5h check CI", 5400, "check CI", "--every=1.5h"),
        ("/hb every 90 minutes check\n  CI", 5400, "check\n  CI", "every 90 minutes"),
        ("/heartbeat 2 hours look", 7200, "look", "2 hours"),
        ("/heartbeat check CI", 300, "check CI", ""),
        ("/heartbeat 3 things to check", 300, "3 things to check", ""),
    ],
)
def test_set_forms(text: str, seconds: int, prompt: str, schedule_text: str) -> None:
    assert parse_command(text, LIMITS) == SetHeartbeat(
        IntervalSchedule(seconds), prompt, schedule_text
    )


@pytest.mark.parametrize(
    ("text", "schedule"),
    [
        ("/heartbeat @daily report", CronSchedule("@daily")),
        ("/heartbeat cron 0 9 * * 1-5 report", CronSchedule("0 9 * * 1-5")),
        ("/heartbeat TZ=Asia/Tokyo 0 9 * * * report", CronSchedule("0 9 * * *", "Asia/Tokyo")),
        ("/heartbeat --tz Asia/Tokyo @hourly report", CronSchedule("@hourly", "Asia/Tokyo")),
        ('/heartbeat --cron "*/30 * * * *" report', CronSchedule("*/30 * * * *")),
    ],
)
def test_cron_set_forms(text: str, schedule: CronSchedule) -> None:
    command = parse_command(text, LIMITS)
    assert isinstance(command, SetHeartbeat)
    assert (command.schedule, command.prompt) == (schedule, "report")


@pytest.mark.parametrize(
    ("text", "error", "needle"),
    [
        ("/heartbeat every 10m", CommandError, "The prompt is required"),
        ("/heartbeat 10m   ", CommandError, "The prompt is required"),
        ("/heartbeat --every 1h", CommandError, "The prompt is required"),
        ("/heartbeat @daily", CommandError, "The prompt is required"),
        ("/heartbeat every banana check", IntervalError, "'banana' is not an interval"),
        ("/heartbeat every 30s check", IntervalError, "Interval too small — minimum is 60s."),
        ("/heartbeat pause now", CommandError, "takes nothing after it"),
        ("/heartbeat " + "x" * 51, CommandError, "51 characters; the limit is 50"),
        ("/heartbeat cron 1-2-3 * * * * x", CronError, "minute field"),
        ("/heartbeat --tz Mars/Base @daily x", CronError, "Unknown timezone"),
        ("/heartbeat --tz UTC check", CommandError, "only applies to cron"),
        ("hello", CommandError, "Not a /heartbeat command"),
    ],
)
def test_command_errors(text: str, error: type[Exception], needle: str) -> None:
    with pytest.raises(error, match=needle.replace("*", r"\*").replace("?", r"\?")):
        parse_command(text, LIMITS)


def test_is_heartbeat_command() -> None:
    assert is_heartbeat_command("/heartbeat")
    assert is_heartbeat_command("  /hb status")
    assert not is_heartbeat_command("/heartbeats")
    assert not is_heartbeat_command("/hbx")
    assert not is_heartbeat_command("tell me about /heartbeat")
