"""Schedules: a fixed interval or a cron expression in a timezone, and when each fires next.

Each grammar owns its schedule type (``IntervalSchedule`` in ``intervals``, ``CronSchedule`` in
``cron``); this module sits above both, so neither has to import the other.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache

from hbgw.sessions.grammar.cron import CronSchedule, cron_next
from hbgw.sessions.grammar.intervals import IntervalSchedule

Schedule = IntervalSchedule | CronSchedule


def next_fire(schedule: Schedule, anchor: datetime) -> datetime:
    """The next due time after ``anchor`` (naive means UTC), as an aware UTC datetime.

    Interval: anchor + interval. Cron: the first occurrence strictly after the anchor, read in the
    schedule's timezone (see ``cron.cron_next`` for the DST rules).
    """
    anchor = anchor.replace(tzinfo=UTC) if anchor.tzinfo is None else anchor.astimezone(UTC)
    if isinstance(schedule, IntervalSchedule):
        return anchor + timedelta(seconds=schedule.seconds)
    return _cron_next(schedule, anchor)


# Pure, and ~1 ms a call: heartbeats set in the same second (and a jittered cron's period, two
# occurrences read per due time) ask the same question many times.
@lru_cache(maxsize=4096)
def _cron_next(schedule: CronSchedule, anchor: datetime) -> datetime:
    return cron_next(schedule, anchor)
