"""Schedules: a fixed interval or a cron expression in a timezone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class IntervalSchedule:
    seconds: int

    def describe(self) -> str:
        from sessions.intervals import format_interval

        return f"every {format_interval(self.seconds)}"


@dataclass(frozen=True)
class CronSchedule:
    expr: str
    timezone: str = "UTC"

    def describe(self) -> str:
        return f"cron {self.expr} ({self.timezone})"


Schedule = IntervalSchedule | CronSchedule


def next_fire(schedule: Schedule, anchor: datetime) -> datetime:
    if anchor.tzinfo is None:
        anchor = anchor.replace(tzinfo=UTC)
    if isinstance(schedule, IntervalSchedule):
        return anchor + timedelta(seconds=schedule.seconds)
    from sessions.cron import cron_next

    return cron_next(schedule, anchor)
