"""Schedules: a fixed interval or a cron expression in a timezone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class IntervalSchedule:
    seconds: int

    def describe(self) -> str:
        # Imported late: intervals and cron import this module for the dataclasses.
        from sessions.intervals import format_interval

        return f"every {format_interval(self.seconds)}"


@dataclass(frozen=True)
class CronSchedule:
    expr: str
    """Normalised five fields (single spaces, lowercase) or an @alias."""
    timezone: str = "UTC"
    """IANA name the fields are read in."""

    def describe(self) -> str:
        return f"cron {self.expr} ({self.timezone})"


Schedule = IntervalSchedule | CronSchedule


def next_fire(schedule: Schedule, anchor: datetime) -> datetime:
    """The next due time after ``anchor`` (naive means UTC), as an aware UTC datetime.

    Interval: anchor + interval. Cron: the first occurrence strictly after the anchor, read in the
    schedule's timezone (see ``sessions.cron.cron_next`` for the DST rules).
    """
    anchor = anchor.replace(tzinfo=UTC) if anchor.tzinfo is None else anchor.astimezone(UTC)
    if isinstance(schedule, IntervalSchedule):
        return anchor + timedelta(seconds=schedule.seconds)
    from sessions.cron import cron_next

    return cron_next(schedule, anchor)
