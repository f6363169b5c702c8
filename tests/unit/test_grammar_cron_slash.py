"""The /cron command line, pure: every schedule form ``hbgw cron add`` takes, the verbs, and a
sentence naming what is wrong for every bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hbgw.core.errors import GrammarError
from hbgw.sessions.grammar import CronSchedule, GrammarLimits, IntervalSchedule, is_cron_command
from hbgw.sessions.grammar.cron_slash import (
    AddJob,
    CronHelp,
    JobVerb,
    ListJobs,
    parse_cron_command,
)
from hbgw.sessions.grammar.job_schedule import OnceSchedule

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
LIMITS = GrammarLimits()


def parse(text: str) -> object:
    return parse_cron_command(text, NOW, LIMITS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/cron", True),
        ("/cron list", True),
        ("  /CRON add", True),
        ("/cron@hbgw_bot list", True),
        ("/cronjob", False),
        ("cron list", False),
        ("/heartbeat cron 0 9 * * *", False),
    ],
)
def test_is_cron_command(text: str, expected: bool) -> None:
    assert is_cron_command(text) is expected


def test_every_schedule_form_with_and_without_the_separator() -> None:
    cases = {
        "/cron add in 10m -- remind me to deploy": OnceSchedule(NOW + timedelta(minutes=10)),
        "/cron add in 90 minutes remind me": OnceSchedule(NOW + timedelta(minutes=90)),
        "/cron add at 2027-01-05T09:00+01:00 -- x": OnceSchedule(
            datetime(2027, 1, 5, 8, 0, tzinfo=UTC)
        ),
        "/cron add every 2h -- check CI": IntervalSchedule(7200),
        "/cron add every 2h check CI": IntervalSchedule(7200),
        "/cron add @daily -- summary": CronSchedule(expr="@daily", timezone="UTC"),
        "/cron add TZ=Europe/Paris 0 9 * * 1-5 -- standup": CronSchedule(
            expr="0 9 * * 1-5", timezone="Europe/Paris"
        ),
        "/cron add 30 8 * * * standup": CronSchedule(expr="30 8 * * *", timezone="UTC"),
    }
    for text, schedule in cases.items():
        command = parse(text)
        assert isinstance(command, AddJob), text
        assert command.schedule == schedule, text
        assert command.prompt and "--" not in command.prompt, text


def test_the_prompt_may_hold_its_own_double_dash_after_the_separator() -> None:
    command = parse("/cron add in 10m -- deploy -- then tell me")
    assert isinstance(command, AddJob) and command.prompt == "deploy -- then tell me"
    assert command.schedule_text == "in 10m"


def test_the_verbs() -> None:
    assert parse("/cron") == ListJobs()
    assert parse("/cron list") == ListJobs()
    assert parse("/cron help") == CronHelp()
    for verb in ("show", "pause", "resume", "cancel"):
        assert parse(f"/cron {verb} j0123456789a") == JobVerb(verb, "j0123456789a")
    assert parse("/cron PAUSE j0123456789a") == JobVerb("pause", "j0123456789a")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("/cron add", "needs a schedule and a prompt"),
        ("/cron add in 10m --", "The prompt is required"),
        ("/cron add -- remind me", "The schedule goes before --"),
        ("/cron add every 0.5s -- x", "minimum"),
        ("/cron add at 2020-01-01T00:00Z -- x", "in the past"),
        ("/cron add at 2027-01-05T09:00 -- x", "no UTC offset"),
        ("/cron add 1-2-3 * * * * -- x", "minute"),
        ("/cron add TZ=Mars/Olympus 0 9 * * * -- x", "Mars/Olympus"),
        ("/cron add every morning -- x", "morning"),
        ("/cron pause", "needs a job id"),
        ("/cron pause j0123456789a j0123456789b", "takes one job id"),
        ("/cron cancel 42", "is not a job id"),
        ("/cron list all", "takes nothing after it"),
        ("/cron delete j0123456789a", "is not a /cron command"),
        ("/heartbeat list", "not a /cron command"),
    ],
)
def test_bad_input_is_a_sentence_naming_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(GrammarError, match=words):
        parse(text)
