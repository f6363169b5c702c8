"""Cron grammar: five fields or an @alias, in an IANA timezone, evaluated by croniter.

croniter is the evaluator, but its parser accepts some garbage (``7-7`` in day-of-week means
every day, reversed ranges silently wrap) and its messages do not say which field is wrong. So
each field is checked here first, with errors that name the field, and croniter is handed a
canonical form (plain numbers) of what was checked. It is imported where it is used (checking
an expression, the next fire): `hbgw heartbeat status` of an interval heartbeat never needs it.

DST rules, as in Vixie cron: a wall-clock time skipped by a spring-forward fires at the end of the
gap; a wall-clock time repeated by a fall-back fires once (its first occurrence), unless the
minute or hour field starts with ``*`` — such "every N minutes/hours" schedules fire in both.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import cache, lru_cache
from itertools import pairwise
from zoneinfo import ZoneInfo, available_timezones

from hbgw.core.errors import CronError
from hbgw.sessions.grammar.intervals import format_interval
from hbgw.sessions.grammar.text import quote

ALIASES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
# Known to cron users but deliberately not offered; they get a pointed error, not "unknown".
UNSUPPORTED_ALIASES = frozenset({"@midnight", "@reboot"})
ALIAS_LIST = "@hourly, @daily, @weekly, @monthly or @yearly"
SHAPE = (
    "five fields (minute hour day-of-month month day-of-week), like 0 9 * * 1-5, "
    f"or one of {ALIAS_LIST}"
)
_TZ_PREFIX = re.compile(r"(?:cron_)?tz=(\S*)(?:\s+|$)", re.IGNORECASE)
_DIGITS = re.compile(r"[0-9]{1,3}")
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# A safety bound: the search normally stops after a few candidates (about 60 when an
# every-minute schedule looks back over a one-hour fall-back overlap).
_MAX_CANDIDATES = 2000
# Weekdays and leap years repeat every 28 years (within a century): every pattern of firing
# days shows in that span.
_CALENDAR_CYCLE_DAYS = 28 * 365 + 7


@dataclass(frozen=True)
class CronSchedule:
    expr: str
    """Normalised five fields (single spaces, lowercase) or an @alias."""
    timezone: str = "UTC"
    """IANA name the fields are read in."""

    def describe(self) -> str:
        return f"cron {self.expr} ({self.timezone})"


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    max_step: int
    names: tuple[str, ...] = ()
    hint: str = ""


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
FIELDS = (
    _Field("minute", 0, 59, 60),
    _Field("hour", 0, 23, 24),
    _Field("day-of-month", 1, 31, 31),
    _Field("month", 1, 12, 12, _MONTHS, "use 1–12 or JAN–DEC"),
    _Field("day-of-week", 0, 7, 7, _DAYS, "use 0–7 (0 and 7 are Sunday) or SUN–SAT"),
)
_DOW = FIELDS[4]


@dataclass(frozen=True)
class _Compiled:
    croniter_expr: str
    repeats_in_fold: bool


def parse_timezone(name: str) -> str:
    """The canonical IANA spelling of ``name`` (case-insensitive), or CronError."""
    key = name.strip()
    if key.upper() == "UTC":
        return "UTC"  # always valid, even on a host without a timezone database
    canonical = _zone_names().get(key.lower())
    if canonical is None:
        shown = quote(key) if key else "''"
        raise CronError(f"Unknown timezone {shown} — use an IANA name such as Europe/Paris.")
    return canonical


@cache
def _zone_names() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()}


def parse_cron(text: str, *, tz: str | None = None, minimum: float = 0) -> CronSchedule:
    """Five fields or an @alias, optionally prefixed ``TZ=Area/City``; ``tz`` is the default.

    ``minimum`` (HBGW_MIN_INTERVAL) binds cron as it binds intervals: a schedule whose two
    closest fires are nearer than that is an error naming both.
    """
    schedule = _parse_cron(text, tz)
    gap = smallest_gap(schedule.expr)
    if gap < minimum:
        floor = max(1, math.ceil(minimum))
        raise CronError(
            f"The schedule {quote(schedule.expr)} fires as often as every "
            f"{format_interval(gap)}, below the minimum interval of {format_interval(floor)} "
            "(HBGW_MIN_INTERVAL) — choose fewer minutes or hours, or a step of at least that."
        )
    return schedule


def _parse_cron(text: str, tz: str | None) -> CronSchedule:
    body = text.strip()
    prefix = _TZ_PREFIX.match(body)
    timezone = parse_timezone(tz) if tz is not None else "UTC"
    if prefix:
        given = parse_timezone(prefix.group(1))
        if tz is not None and given != timezone:
            raise CronError(
                f"The timezone is given twice, as {given} and {timezone} — give it once."
            )
        timezone, body = given, body[prefix.end() :]
    tokens = body.lower().split()
    if len(tokens) == 1 and tokens[0].startswith("@"):
        return CronSchedule(expr=_alias(tokens[0]), timezone=timezone)
    if len(tokens) == 6:
        raise CronError(
            f"{quote(body)} has six fields, but a seconds field is not supported — "
            f"a cron schedule has {SHAPE}."
        )
    if len(tokens) != 5:
        shown = f"{quote(body)} has {len(tokens)}" if tokens else "nothing was given"
        raise CronError(f"A cron schedule needs {SHAPE}; {shown}.")
    expr = " ".join(tokens)
    _compile(expr)
    from croniter import croniter

    # A second opinion from the evaluator itself, should its grammar ever be narrower than ours.
    if not croniter.is_valid(expr):
        raise CronError(f"The cron expression {quote(expr)} is not valid — it needs {SHAPE}.")
    return CronSchedule(expr=expr, timezone=timezone)


@lru_cache(maxsize=512)
def smallest_gap(expr: str) -> int:
    """Seconds between the two closest fires of ``expr``, on the wall clock (a DST change may
    shorten one gap on its day; that is not counted).

    Fires are (day, hour, minute) triples: the closest two are in one hour (the smallest step
    between chosen minutes), in neighbouring chosen hours of a day, or across the night
    between the closest two firing days.
    """
    fields = ALIASES.get(expr, expr).split()
    minutes, hours, days, months, weekdays = (
        sorted(_values(spec, text)) for spec, text in zip(FIELDS, fields, strict=True)
    )
    gaps = [b - a for a, b in pairwise(minutes)]
    span = minutes[-1] - minutes[0]
    gaps += [(b - a) * 60 - span for a, b in pairwise(hours)]
    day_gap = _smallest_day_gap(fields, set(days), set(months), set(weekdays))
    last, first = hours[-1] * 60 + minutes[-1], hours[0] * 60 + minutes[0]
    gaps.append(day_gap * 1440 - last + first)
    return 60 * min(gaps)


def _smallest_day_gap(
    fields: list[str], days: set[int], months: set[int], weekdays: set[int]
) -> int:
    """The fewest days between two firing days: every day when no day field restricts it,
    else counted over a 28-year calendar cycle (leap days included)."""
    if fields[2] == fields[4] == "*" and len(months) == 12:
        return 1
    start = date(2001, 1, 1)
    firing = [
        n
        for n in range(_CALENDAR_CYCLE_DAYS)
        if _fires_on(start + timedelta(days=n), fields, days, months, weekdays)
    ]
    gaps = [b - a for a, b in pairwise(firing)]
    return min(gaps) if gaps else _CALENDAR_CYCLE_DAYS


def _fires_on(
    day: date, fields: list[str], days: set[int], months: set[int], weekdays: set[int]
) -> bool:
    if day.month not in months:
        return False
    by_date, by_weekday = day.day in days, (day.isoweekday() % 7) in weekdays
    if fields[2] != "*" and fields[4] != "*":
        return by_date or by_weekday  # both restricted: cron fires on either
    return by_date and by_weekday


def _alias(token: str) -> str:
    if token in ALIASES:
        return token
    if token in UNSUPPORTED_ALIASES:
        raise CronError(f"{token} is not supported — use {ALIAS_LIST}, or five fields.")
    raise CronError(f"{quote(token)} is not a cron alias — use {ALIAS_LIST}, or five fields.")


@lru_cache(maxsize=512)
def _compile(expr: str) -> _Compiled:
    text = ALIASES.get(expr, expr)
    fields = text.split()
    if len(fields) != len(FIELDS):
        raise CronError(f"A cron schedule needs {SHAPE}; {quote(expr)} does not have five.")
    values = [_values(spec, field) for spec, field in zip(FIELDS, fields, strict=True)]
    _check_fires(expr, fields, values)
    canonical = " ".join(
        "*" if field == "*" else ",".join(map(str, sorted(found)))
        for field, found in zip(fields, values, strict=True)
    )
    return _Compiled(canonical, fields[0].startswith("*") or fields[1].startswith("*"))


def _values(spec: _Field, text: str) -> frozenset[int]:
    found: set[int] = set()
    for item in text.split(","):
        base, slash, step_text = item.partition("/")
        step = _step(spec, text, step_text) if slash else 1
        if not item:
            raise _bad(spec, text, "a list needs a value between every two commas (like 1,15)")
        if not base:
            raise _bad(spec, text, "a step needs something to step through (like */15 or 0-30/5)")
        if base == "*":
            start, end = spec.low, spec.high
        else:
            bounds = base.split("-")
            if len(bounds) > 2:
                raise _bad(spec, text, "a range has one dash (like 1-5)")
            if "" in bounds:
                raise _bad(spec, text, "a range has a value on each side of its dash (like 1-5)")
            numbers = [_number(spec, text, bound) for bound in bounds]
            start = numbers[0]
            end = numbers[-1] if len(numbers) == 2 else (spec.high if slash else start)
            if spec is _DOW and len(numbers) == 2 and end == 0 < start:
                end = 7  # FRI-SUN: Sunday closes the week
            if start > end:
                raise _bad(spec, text, "a range goes from low to high (like 1-5)")
        found.update(range(start, end + 1, step))
    if spec is _DOW and 7 in found:
        found = (found - {7}) | {0}
    return frozenset(found)


def _step(spec: _Field, text: str, step_text: str) -> int:
    if not _DIGITS.fullmatch(step_text):
        raise _bad(spec, text, "a step is a whole number after one slash (like */15)")
    step = int(step_text)
    if step < 1:
        raise _bad(spec, text, "a step must be at least 1 (like */15)")
    if step > spec.max_step:
        raise _bad(spec, text, f"a step can be at most {spec.max_step}")
    return step


def _number(spec: _Field, text: str, token: str) -> int:
    if token in spec.names:
        return spec.names.index(token) + (1 if spec.name == "month" else 0)
    if not token.isascii() or not token.isdigit():
        reason = spec.hint or f"the values are numbers {spec.low}–{spec.high}"
        raise _bad(spec, text, f"{quote(token)} is not a value here; {reason}")
    if len(token) > 2 or not spec.low <= int(token) <= spec.high:
        raise _bad(spec, text, f"{token} is outside {spec.low}–{spec.high}")
    return int(token)


def _bad(spec: _Field, text: str, reason: str) -> CronError:
    return CronError(f"The {spec.name} field {quote(text)} is not valid: {reason}.")


def _check_fires(expr: str, fields: list[str], values: list[frozenset[int]]) -> None:
    """Reject a day-of-month that no chosen month has (31 in February): it would never fire."""
    if fields[4] != "*":
        return  # a restricted day-of-week is OR-ed with the day-of-month, so it still fires
    longest = max(_DAYS_IN_MONTH[month - 1] for month in values[3])
    if min(values[2]) > longest:
        raise CronError(
            f"The schedule {quote(expr)} never fires: no chosen month has "
            f"day {min(values[2])} (the longest has {longest} days)."
        )


def cron_next(schedule: CronSchedule, after: datetime) -> datetime:
    """The first occurrence strictly after ``after`` (naive means UTC), as an aware UTC datetime.

    Candidates are wall-clock times from croniter, mapped to real instants in the schedule's
    timezone by the DST rules in the module docstring.
    """
    from croniter import CroniterError, croniter

    compiled = _compile(schedule.expr)
    zone = _zone(schedule.timezone)
    after = after.replace(tzinfo=UTC) if after.tzinfo is None else after.astimezone(UTC)
    wall = after.astimezone(zone).replace(tzinfo=None, fold=0)
    first, second = _instants(wall, zone)
    # Inside a fall-back overlap, earlier wall times still have a second occurrence ahead.
    lookback = second - first if second is not None else timedelta(0)
    try:
        walls = croniter(compiled.croniter_expr, wall - lookback)
        best: datetime | None = None
        for _ in range(_MAX_CANDIDATES):
            candidate = walls.get_next(datetime)
            first, second = _instants(candidate, zone)
            if best is not None and first >= best:
                return best  # first instants never decrease as wall time increases
            if first > after:
                best = first if best is None else min(best, first)
            if second is not None and compiled.repeats_in_fold and second > after:
                best = second if best is None else min(best, second)
    except (CroniterError, OverflowError) as exc:
        raise CronError(f"The schedule {quote(schedule.expr)} has no next fire time.") from exc
    if best is None:
        raise CronError(f"The schedule {quote(schedule.expr)} has no next fire time.")
    return best


def _zone(name: str) -> tzinfo:
    return UTC if name == "UTC" else ZoneInfo(parse_timezone(name))


def _instants(wall: datetime, zone: tzinfo) -> tuple[datetime, datetime | None]:
    """Real instants of a naive wall time: (only or first, second occurrence or None).

    A wall time inside a spring-forward gap maps to the end of the gap.
    """
    early = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    late = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if early == late:
        return early, None
    if early < late:
        return early, late
    return _transition(late, early, zone), None


def _transition(before: datetime, after: datetime, zone: tzinfo) -> datetime:
    """The first second at or after which the UTC offset differs from the one at ``before``."""
    offset = before.astimezone(zone).utcoffset()
    while after - before > timedelta(seconds=1):
        middle = before + (after - before) // 2
        middle = middle.replace(microsecond=0)
        if middle.astimezone(zone).utcoffset() == offset:
            before = middle
        else:
            after = middle
    return after
