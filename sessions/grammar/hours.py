"""Active hours: a daily window of wall-clock time in an IANA timezone, weekdays optional.

Pure. A window is ``[start, end)`` in local time; ``end <= start`` crosses midnight (22:00-06:00
is one window from 22:00 to 06:00 the next morning) and ``start == end`` is the whole day. A
window belongs to the day it starts on, so ``weekdays`` keeps the windows that start Monday to
Friday (Friday 22:00 to Saturday 06:00 is open).

DST: a start or end time skipped by a spring-forward happens when the clock jumps past it (a
02:30 start in Europe/Paris on the last Sunday of March opens at 03:00 CEST); a time repeated by a
fall-back happens at its first occurrence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

# A window opens at least once a week (weekdays) and this looks one day back for a window
# that crossed midnight: nine local days always hold the next opening.
_DAYS_SEARCHED = 9


@dataclass(frozen=True)
class ActiveHours:
    start: time
    end: time
    timezone: str = "UTC"
    weekdays: bool = False

    def describe(self) -> str:
        days = " weekdays" if self.weekdays else ""
        return f"{self.start:%H:%M}-{self.end:%H:%M} {self.timezone}{days}"

    @classmethod
    def from_text(cls, text: str) -> ActiveHours:
        """Back from ``describe()`` (as stored)."""
        window, zone, *days = text.split()
        start, end = (time.fromisoformat(part) for part in window.split("-"))
        return cls(start, end, zone, days == ["weekdays"])

    def next_open(self, moment: datetime) -> datetime:
        """``moment`` when it falls inside a window, else the next window's start (aware UTC)."""
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        zone = ZoneInfo(self.timezone)
        first_day = moment.astimezone(zone).date() - timedelta(days=1)
        for offset in range(_DAYS_SEARCHED):
            day = first_day + timedelta(days=offset)
            if self.weekdays and day.weekday() >= 5:
                continue
            opens, closes = self._window(day, zone)
            if opens <= moment < closes:
                return moment
            if opens > moment:
                return opens
        raise AssertionError("an active-hours window opens at least once a week")

    def _window(self, day: date, zone: ZoneInfo) -> tuple[datetime, datetime]:
        end_day = day if self.end > self.start else day + timedelta(days=1)
        return instant(day, self.start, zone), instant(end_day, self.end, zone)


def instant(day: date, wall: time, zone: ZoneInfo) -> datetime:
    """The UTC instant a wall-clock time on ``day`` happens: its first occurrence, or the end of
    the gap when a spring-forward skips it."""
    naive = datetime.combine(day, wall)
    first = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == naive:
        return first
    # Skipped: fold=1 reads it with the later offset, an instant before the jump; the jump is
    # the first instant whose wall time is at or past ``naive``.
    low, high = naive.replace(tzinfo=zone, fold=1).astimezone(UTC), first
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).replace(tzinfo=None) >= naive:
            high = middle
        else:
            low = middle
    # Zones change offset on whole seconds: the one whole second in (low, high] is the jump.
    return high.replace(microsecond=0)
