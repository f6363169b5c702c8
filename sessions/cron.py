"""Cron grammar: five fields or an @alias, in an IANA timezone, evaluated by croniter."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from hbgw.errors import CronError
from sessions.schedule import CronSchedule

ALIASES = {"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually"}
FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)
NAMES = {
    "month": ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    "day-of-week": ["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
}
SHAPE = (
    "five fields (minute hour day-of-month month day-of-week) or @hourly/@daily/@weekly/@monthly"
)
_TZ_PREFIX = re.compile(r"^\s*(?:CRON_)?TZ=(\S+)\s+(.*)$", re.IGNORECASE | re.DOTALL)


def parse_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise CronError(
            f"Unknown timezone '{name}' — use an IANA name such as Europe/Paris."
        ) from exc
    return name


def parse_cron(text: str, *, tz: str | None = None) -> CronSchedule:
    expr = text.strip()
    prefix = _TZ_PREFIX.match(expr)
    if prefix:
        if tz and tz != prefix.group(1):
            raise CronError(f"Two timezones given ({prefix.group(1)} and {tz}); keep one of them.")
        tz, expr = prefix.group(1), prefix.group(2).strip()
    timezone = parse_timezone(tz) if tz else "UTC"
    fields = expr.split()
    if len(fields) == 1 and fields[0].lower() in ALIASES:
        return CronSchedule(expr=fields[0].lower(), timezone=timezone)
    if len(fields) != 5:
        raise CronError(f"A cron schedule needs {SHAPE}; '{expr}' has {len(fields)} fields.")
    for value, (name, low, high) in zip(fields, FIELDS, strict=True):
        _check_field(value, name, low, high)
    normalised = " ".join(fields)
    try:
        croniter(normalised)
    except (CroniterError, ValueError, KeyError) as exc:
        raise CronError(f"'{normalised}' is not a valid cron expression: {exc}.") from exc
    return CronSchedule(expr=normalised, timezone=timezone)


def _check_field(value: str, name: str, low: int, high: int) -> None:
    """Each comma part is *, N, N-M, with an optional /step; errors name the field."""
    for part in value.split(","):
        base, slash, step = part.partition("/")
        if slash:
            if not step.isdigit():
                raise CronError(
                    f"The {name} field '{value}' has a step '{step}' that is not a number."
                )
            if int(step) < 1:
                raise CronError(
                    f"The {name} field '{value}' is not valid: a step must be at least 1."
                )
        if base == "*":
            continue
        bounds = base.split("-")
        if len(bounds) > 2 or "" in bounds:
            raise CronError(
                f"The {name} field '{value}' is not valid: a range has one dash (like 1-5)."
            )
        numbers = [_number(b, name, value) for b in bounds]
        for number in numbers:
            if not low <= number <= high:
                raise CronError(
                    f"The {name} field '{value}' is out of range: allowed values are {low}–{high}."
                )
        if len(numbers) == 2 and numbers[0] > numbers[1]:
            raise CronError(f"The {name} field '{value}' has a range that runs backwards.")


def _number(token: str, name: str, value: str) -> int:
    if token.isdigit():
        return int(token)
    names = NAMES.get(name, [])
    if token.lower() in names:
        return names.index(token.lower()) + (1 if name == "month" else 0)
    raise CronError(f"The {name} field '{value}' is not valid: '{token}' is not a number.")


def cron_next(schedule: CronSchedule, after: datetime) -> datetime:
    """The first occurrence strictly after ``after``, in the schedule's timezone, as UTC."""
    zone = ZoneInfo(schedule.timezone)
    local = after.astimezone(zone)
    moment = croniter(schedule.expr, local).get_next(datetime)
    assert isinstance(moment, datetime)
    return moment.astimezone(UTC)
