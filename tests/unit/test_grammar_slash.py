"""Grammar tables: the /heartbeat slash command (keywords, schedules, prompts, errors)."""

from __future__ import annotations

import re

import pytest

from hbgw.core.errors import CommandError, CronError, GrammarError, IntervalError
from hbgw.sessions.grammar import (
    Clear,
    Command,
    CronSchedule,
    GrammarLimits,
    IntervalSchedule,
    Pause,
    Resume,
    SetHeartbeat,
    ShowHelp,
    ShowStatus,
    help_text,
    is_heartbeat_command,
    parse_command,
)


def literally(text: str) -> str:
    return re.escape(text)


# -- slash commands -------------------------------------------------------------------------

LIMITS = GrammarLimits(min_interval=60, default_interval=300, max_prompt_chars=50)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/heartbeat", ShowStatus()),
        ("  /heartbeat  ", ShowStatus()),
        ("/hb", ShowStatus()),
        ("/heartbeat status", ShowStatus()),
        ("/HB STATUS", ShowStatus()),
        ("/Heartbeat Status", ShowStatus()),
        ("/heartbeat pause", Pause()),
        ("/heartbeat resume", Resume()),
        ("/heartbeat resume!", Resume()),
        ("/heartbeat clear", Clear()),
        ("/heartbeat stop", Clear()),
        ("/heartbeat stop.", Clear()),
        ("/hb off", Clear()),
        ("/heartbeat@HermesBot status", ShowStatus()),
        ("/hb@bot_1", ShowStatus()),
        ("/heartbeat\n pause \n", Pause()),
        ("/heartbeat help", ShowHelp()),
        ("/hb HELP", ShowHelp()),
    ],
)
def test_keywords(text: str, expected: Command) -> None:
    assert parse_command(text, LIMITS) == expected


@pytest.mark.parametrize(
    ("text", "seconds", "prompt", "schedule_text"),
    [
        ("/heartbeat every 10m check CI", 600, "check CI", "every 10m"),
        ("/heartbeat 10m check CI", 600, "check CI", "10m"),
        ("/heartbeat 10 m check CI", 600, "check CI", "10 m"),
        ("/heartbeat --every 10m check CI", 600, "check CI", "--every 10m"),
        ("/heartbeat --every 90 minutes check CI", 5400, "check CI", "--every 90 minutes"),
        ("/heartbeat --every=1.5h check CI", 5400, "check CI", "--every=1.5h"),
        ("/hb every 90 minutes check\n  CI", 5400, "check\n  CI", "every 90 minutes"),
        ("/heartbeat EVERY 2 Hours look", 7200, "look", "EVERY 2 Hours"),
        ("/heartbeat 1.5h look", 5400, "look", "1.5h"),
        ("/heartbeat every\n10m\nlook\n\nagain  ", 600, "look\n\nagain", "every 10m"),
        ("/heartbeat@Bot 1d digest", 86400, "digest", "1d"),
        ("/heartbeat check CI", 300, "check CI", ""),
        ("/heartbeat 3 things to check", 300, "3 things to check", ""),
        ("/heartbeat 10ms is the budget", 300, "10ms is the budget", ""),
        ("/heartbeat 2nd build, check it", 300, "2nd build, check it", ""),
        ("/heartbeat @alice please look", 300, "@alice please look", ""),
        ("/heartbeat everyday check", 300, "everyday check", ""),
        ("/heartbeat stopwatch check", 300, "stopwatch check", ""),
        ("/heartbeat 10m every 5m check", 600, "every 5m check", "10m"),
        ("/heartbeat every 5m stop the build if red", 300, "stop the build if red", "every 5m"),
        ("/heartbeat every 10m run --dry-run", 600, "run --dry-run", "every 10m"),
    ],
)
def test_set_interval_forms(text: str, seconds: int, prompt: str, schedule_text: str) -> None:
    assert parse_command(text, LIMITS) == SetHeartbeat(
        IntervalSchedule(seconds), prompt, schedule_text
    )


def test_default_interval_comes_from_the_limits() -> None:
    command = parse_command("/hb look", GrammarLimits(default_interval=900))
    assert command == SetHeartbeat(IntervalSchedule(900), "look", "")


@pytest.mark.parametrize(
    ("text", "schedule", "schedule_text"),
    [
        ("/heartbeat @daily report", CronSchedule("@daily"), "@daily"),
        ("/heartbeat @HOURLY report", CronSchedule("@hourly"), "@HOURLY"),
        ("/heartbeat @weekly report", CronSchedule("@weekly"), "@weekly"),
        ("/heartbeat @monthly report", CronSchedule("@monthly"), "@monthly"),
        ("/heartbeat cron 0 9 * * 1-5 report", CronSchedule("0 9 * * 1-5"), "cron 0 9 * * 1-5"),
        ("/heartbeat CRON 0 9 * * MON report", CronSchedule("0 9 * * mon"), "CRON 0 9 * * MON"),
        ("/heartbeat cron @daily report", CronSchedule("@daily"), "cron @daily"),
        (
            "/heartbeat TZ=Asia/Tokyo 0 9 * * * report",
            CronSchedule("0 9 * * *", "Asia/Tokyo"),
            "TZ=Asia/Tokyo 0 9 * * *",
        ),
        (
            "/heartbeat TZ=Asia/Tokyo @daily report",
            CronSchedule("@daily", "Asia/Tokyo"),
            "TZ=Asia/Tokyo @daily",
        ),
        (
            "/heartbeat TZ=Asia/Tokyo cron 0 9 * * * report",
            CronSchedule("0 9 * * *", "Asia/Tokyo"),
            "TZ=Asia/Tokyo cron 0 9 * * *",
        ),
        (
            "/heartbeat cron TZ=Asia/Tokyo 0 9 * * * report",
            CronSchedule("0 9 * * *", "Asia/Tokyo"),
            "cron TZ=Asia/Tokyo 0 9 * * *",
        ),
        (
            "/heartbeat --tz Asia/Tokyo @hourly report",
            CronSchedule("@hourly", "Asia/Tokyo"),
            "--tz Asia/Tokyo @hourly",
        ),
        (
            "/heartbeat @hourly --tz=asia/tokyo report",
            CronSchedule("@hourly", "Asia/Tokyo"),
            "@hourly --tz=asia/tokyo",
        ),
        (
            '/heartbeat --cron "*/30 * * * *" report',
            CronSchedule("*/30 * * * *"),
            '--cron "*/30 * * * *"',
        ),
        (
            "/heartbeat --cron '0 9 * * 1-5' --tz Europe/Paris report",
            CronSchedule("0 9 * * 1-5", "Europe/Paris"),
            "--cron '0 9 * * 1-5' --tz Europe/Paris",
        ),
        (
            "/heartbeat --cron “0 9 * * *” report",
            CronSchedule("0 9 * * *"),
            "--cron “0 9 * * *”",
        ),
        (
            '/heartbeat --cron="TZ=Asia/Tokyo 0 9 * * *" report',
            CronSchedule("0 9 * * *", "Asia/Tokyo"),
            '--cron="TZ=Asia/Tokyo 0 9 * * *"',
        ),
        ("/heartbeat --cron=@daily report", CronSchedule("@daily"), "--cron=@daily"),
        ("/heartbeat --cron 0 9 * * * report", CronSchedule("0 9 * * *"), "--cron 0 9 * * *"),
        (
            "/heartbeat cron 0 9 * * *\nreport",
            CronSchedule("0 9 * * *"),
            "cron 0 9 * * *",
        ),
    ],
)
def test_set_cron_forms(text: str, schedule: CronSchedule, schedule_text: str) -> None:
    assert parse_command(text, LIMITS) == SetHeartbeat(schedule, "report", schedule_text)


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (
            "/heartbeat every 10m",
            CommandError,
            "The prompt is required — for example: /heartbeat every 10m check CI.",
        ),
        ("/heartbeat 10m   ", CommandError, "The prompt is required"),
        ("/heartbeat 90 minutes", CommandError, "The prompt is required"),
        ("/heartbeat --every 1h", CommandError, "The prompt is required"),
        ("/heartbeat @daily", CommandError, "The prompt is required"),
        ("/heartbeat cron 0 9 * * *", CommandError, "The prompt is required"),
        ('/heartbeat --cron "0 9 * * *"  ', CommandError, "The prompt is required"),
        ("/heartbeat TZ=Asia/Tokyo @daily", CommandError, "The prompt is required"),
        ("/heartbeat every banana check", IntervalError, "'banana' is not an interval — write a"),
        ("/heartbeat every 10 check", IntervalError, "'10' is not an interval"),
        ("/heartbeat every morning", IntervalError, "'morning' is not an interval"),
        ("/heartbeat every", IntervalError, "'every' needs an interval after it"),
        ("/heartbeat --every", IntervalError, "'--every' needs an interval after it"),
        ("/heartbeat --every= check", CommandError, "--every needs an interval"),
        ("/heartbeat --every=soon check", IntervalError, "'soon' is not an interval"),
        ("/heartbeat 1e400s check", IntervalError, "'1e400s' is not an interval"),
        ("/heartbeat 1,5h check", IntervalError, "'1,5h' is not an interval"),
        ("/heartbeat every 30s check", IntervalError, "Interval too small — minimum is 60s."),
        ("/heartbeat 59 seconds check", IntervalError, "Interval too small — minimum is 60s."),
        ("/heartbeat 0m check", IntervalError, "Interval too small — minimum is 60s."),
        ("/heartbeat -5m check", IntervalError, "Interval too small — minimum is 60s."),
        ("/heartbeat 1.5s check", IntervalError, "Interval too small — minimum is 60s."),
        ("/heartbeat 400d check", IntervalError, "Interval too large"),
        ("/heartbeat pause now", CommandError, "'/heartbeat pause' takes nothing after it"),
        ("/heartbeat stop checking CI", CommandError, "'/heartbeat stop' takes nothing"),
        ("/heartbeat status of the deploy", CommandError, "'/heartbeat status' takes nothing"),
        ("/heartbeat " + "x" * 51, CommandError, "The prompt is too long — 51 characters; the"),
        ("/heartbeat 10m " + "x" * 60, CommandError, "60 characters; the limit is 50."),
        ("/heartbeat cron 1-2-3 * * * * x", CronError, "The minute field '1-2-3' is not valid"),
        ("/heartbeat cron 61 * * * * x", CronError, "The minute field '61' is not valid"),
        ("/heartbeat cron */0 * * * * x", CronError, "The minute field '*/0' is not valid"),
        ("/heartbeat cron 0 9 * * x", CronError, "The day-of-week field 'x' is not valid"),
        ("/heartbeat cron 0 9 * *", CronError, "A cron schedule needs five fields"),
        ("/heartbeat cron 0 0 9 * * * x", CronError, "'*' looks like a sixth"),
        ("/heartbeat TZ=Asia/Tokyo check", CronError, "needs five fields"),
        ("/heartbeat TZ=Asia/Tokyo 0 9 * * check", CronError, "day-of-week field 'check'"),
        ("/heartbeat TZ=Mars/Base @daily x", CronError, "Unknown timezone 'Mars/Base'"),
        ("/heartbeat --tz Mars/Base @daily x", CronError, "Unknown timezone 'Mars/Base'"),
        ("/heartbeat --tz Asia/Tokyo TZ=Europe/Paris @daily x", CronError, "given twice"),
        ("/heartbeat --tz UTC --tz UTC @daily x", CommandError, "--tz is given twice"),
        ("/heartbeat --tz", CommandError, "--tz needs a timezone"),
        ("/heartbeat --tz UTC check", CommandError, "--tz only applies to cron schedules"),
        ("/heartbeat every 10m --tz UTC check", CommandError, "--tz only applies to cron"),
        ("/heartbeat @midnight backup", CronError, "@midnight is not supported"),
        ('/heartbeat --cron "0 9 * * * check', CommandError, 'has no closing "'),
        ("/heartbeat --cron=0 check", CommandError, "--cron needs the expression in quotes"),
        ('/heartbeat --cron "61 * * * *" x', CronError, "The minute field '61' is not valid"),
        ("/heartbeat --verbose check", CommandError, "Unknown option '--verbose'"),
        ("hello", CommandError, "That is not a /heartbeat command"),
        ("/heartbeats", CommandError, "That is not a /heartbeat command"),
        ("", CommandError, "That is not a /heartbeat command"),
    ],
)
def test_command_errors(text: str, error: type[GrammarError], message: str) -> None:
    with pytest.raises(error, match=literally(message)):
        parse_command(text, LIMITS)


def test_prompt_at_the_limit_is_accepted() -> None:
    command = parse_command("/heartbeat " + "x" * 50, LIMITS)
    assert isinstance(command, SetHeartbeat)
    assert len(command.prompt) == 50


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/heartbeat", True),
        ("  /hb status", True),
        ("/HB", True),
        ("/heartbeat\nevery 10m x", True),
        ("/heartbeat@MyBot status", True),
        ("/heartbeats", False),
        ("/hbx", False),
        ("heartbeat", False),
        ("/heartbeat-now", False),
        ("tell me about /heartbeat", False),
        ("", False),
    ],
)
def test_is_heartbeat_command(text: str, expected: bool) -> None:
    assert is_heartbeat_command(text) is expected


def test_help_text_lists_the_forms() -> None:
    text = help_text()
    for form in ("every 10m", "--every", "cron", "@daily", "TZ=", "--tz", "status", "pause"):
        assert form in text
    for form in ("resume", "clear", "stop", "off", "/hb"):
        assert form in text


# -- a mistyped subcommand is a question, never a heartbeat ---------------------------------


@pytest.mark.parametrize(
    ("text", "keyword", "word"),
    [
        ("/heartbeat stauts", "status", "stauts"),
        ("/heartbeat pasue", "pause", "pasue"),
        ("/hb Statsu", "status", "Statsu"),
        ("/heartbeat resme", "resume", "resme"),
        ("/heartbeat resum!", "resume", "resum!"),
        ("/heartbeat claer", "clear", "claer"),
        ("/heartbeat sotp", "stop", "sotp"),
        ("/heartbeat of", "off", "of"),
        ("/heartbeat hepl", "help", "hepl"),
        ("/heartbeat puase.", "pause", "puase."),
    ],
)
def test_a_word_close_to_a_subcommand_is_a_question(text: str, keyword: str, word: str) -> None:
    expected = (
        f"Did you mean /heartbeat {keyword}? To set a heartbeat with this text, write "
        f"/heartbeat every 5m {word}."
    )
    with pytest.raises(CommandError, match=f"^{literally(expected)}$"):
        parse_command(text, LIMITS)


def test_the_suggested_interval_is_the_default_one() -> None:
    limits = GrammarLimits(min_interval=60, default_interval=5400, max_prompt_chars=50)
    with pytest.raises(CommandError, match=literally("write /heartbeat every 90m stauts.")):
        parse_command("/heartbeat stauts", limits)


@pytest.mark.parametrize(
    "text",
    [
        "/heartbeat every 5m stauts",  # a schedule first: the user means the text
        "/heartbeat stauts of the deploy",  # more than one word: a prompt
        "/heartbeat hello",  # two edits from help, but help is short: one edit at most
        "/heartbeat deploy",
        "/heartbeat check",
        "/heartbeat summarize",
        "/heartbeat statistics",
    ],
)
def test_other_prompts_are_still_set(text: str) -> None:
    assert isinstance(parse_command(text, LIMITS), SetHeartbeat)
