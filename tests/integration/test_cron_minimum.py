"""Issue 15, hole 10: HBGW_MIN_INTERVAL binds cron schedules as it binds intervals.

A cron expression's two closest fires (on the wall clock) must be at least the minimum apart;
otherwise one sentence names the gap and the minimum — in /heartbeat and `hbgw heartbeat set`.
"""

from __future__ import annotations

import pytest
from support.cli_fixtures import Hbgw

from hbgw.core.errors import CronError
from hbgw.sessions.grammar import CronSchedule, GrammarLimits, parse_cron
from hbgw.sessions.grammar.cron import smallest_gap
from hbgw.sessions.grammar.slash import parse_command

HOUR = GrammarLimits(min_interval=3600)


@pytest.mark.parametrize(
    ("expr", "seconds"),
    [
        ("* * * * *", 60),
        ("*/15 * * * *", 900),
        ("5,55 * * * *", 600),  # :55 to :05 of the next hour
        ("0 * * * *", 3600),
        ("0 0,23 * * *", 3600),  # 23:00 to midnight
        ("0,30 9-17 * * 1-5", 1800),
        ("59 23 * * *", 86400),
        ("0 9 * * 1-5", 86400),
        ("@weekly", 7 * 86400),
        ("0 9 31 * *", 31 * 86400),  # July 31 to August 31
        ("0 9 29 2 *", 1461 * 86400),  # leap day to leap day
        ("0 12 1,15 * 1", 86400),  # day 1 or 15, or any Monday: the 14th a Monday, then the 15th
    ],
)
def test_the_smallest_gap_of_a_schedule(expr: str, seconds: int) -> None:
    assert smallest_gap(expr) == seconds


def test_an_every_minute_cron_is_refused_under_a_one_hour_minimum() -> None:
    with pytest.raises(CronError) as error:
        parse_cron("* * * * *", minimum=3600)
    assert str(error.value) == (
        "The schedule '* * * * *' fires as often as every 1m, below the minimum interval of 1h "
        "(HBGW_MIN_INTERVAL) — choose fewer minutes or hours, or a step of at least that."
    )


@pytest.mark.parametrize(
    "command", ["/heartbeat cron */30 * * * * check", '/heartbeat --cron "5,55 * * * *" check']
)
def test_the_slash_command_applies_the_minimum_to_cron(command: str) -> None:
    with pytest.raises(CronError, match="below the minimum interval of 1h"):
        parse_command(command, HOUR)


def test_a_schedule_at_the_minimum_is_accepted() -> None:
    assert parse_cron("0 * * * *", minimum=3600) == CronSchedule("0 * * * *")
    assert parse_cron("@daily", minimum=86400) == CronSchedule("@daily")


def test_hbgw_heartbeat_set_refuses_it_with_exit_2(
    hbgw: Hbgw, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HBGW_MIN_INTERVAL", "3600")
    monkeypatch.setenv("HBGW_DEFAULT_INTERVAL", "2h")
    sid = hbgw("session", "create", "--platform", "cli", "--chat", "me").out.strip()
    result = hbgw("heartbeat", "set", sid, "--cron", "* * * * *", "check")
    assert result.code == 2, result
    assert "fires as often as every 1m, below the minimum interval of 1h" in result.err
    assert hbgw("heartbeat", "set", sid, "--cron", "0 * * * *", "check").code == 0
