"""Interval grammar: ``10m``, ``10 m``, ``every 90 minutes``, ``1.5h``.

Pure functions, no I/O. Arithmetic is exact (``Fraction``) so ``1.5h`` is exactly 5400 s and a
value that is not a whole number of seconds is reported instead of being rounded.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from hbgw.core.errors import IntervalError
from hbgw.sessions.grammar.text import quote

UNITS: dict[str, int] = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
}
# Beyond a year an interval is a calendar event (use cron @yearly), and the cap keeps every
# value representable in datetime arithmetic and a 32-bit SQL integer.
MAX_INTERVAL = 366 * 86400

# A sign is accepted only so that "-5m" gets the minimum error rather than a syntax lecture.
NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
_INTERVAL = re.compile(rf"\s*(?:(?i:every)\s+)?({NUMBER})\s*([A-Za-z]+)\s*")
_MAX_NUMBER_CHARS = 40
# "every 366 days" with room to spare; a longer text is refused before the pattern reads it.
_MAX_INTERVAL_CHARS = 100
FORMS = (
    "write a number and a unit, such as 30s, 10m, 1.5h, 2d or every 90 minutes "
    "(units: s, sec, second, m, min, minute, h, hr, hour, d, day, and their plurals)"
)
_LARGEST_FIRST = (("d", 86400), ("h", 3600), ("m", 60))


@dataclass(frozen=True)
class IntervalSchedule:
    """A heartbeat every ``seconds``, counted from its anchor."""

    seconds: int

    def describe(self) -> str:
        return f"every {format_interval(self.seconds)}"


def forms_error(text: str) -> IntervalError:
    if not text.strip():
        return IntervalError(f"No interval was given — {FORMS}.")
    return IntervalError(f"{quote(text)} is not an interval — {FORMS}.")


def unit_seconds(word: str) -> int | None:
    """Seconds in one ``word`` (any case), or None when it is not a unit spelling."""
    return UNITS.get(word.lower()) if word.isascii() else None


def parse_interval(text: str, *, minimum: float = 60) -> int:
    """Whole seconds; below ``minimum`` is an error, never a silent clamp."""
    if len(text) > _MAX_INTERVAL_CHARS:
        raise IntervalError(f"{quote(text)} is too long to be an interval — {FORMS}.")
    match = _INTERVAL.fullmatch(text)
    size = unit_seconds(match.group(2)) if match else None
    if match is None or size is None:
        raise forms_error(text)
    number = match.group(1)
    if len(number) > _MAX_NUMBER_CHARS:
        raise IntervalError(f"The number in {quote(text)} is too long to be an interval.")
    seconds = Fraction(number) * size
    floor = max(1, math.ceil(minimum))
    if seconds < floor:
        raise IntervalError(f"Interval too small — minimum is {_format_minimum(floor)}.")
    if seconds > MAX_INTERVAL:
        raise IntervalError(
            f"Interval too large — maximum is {format_interval(MAX_INTERVAL)}; "
            "for a yearly reminder use a cron schedule such as @yearly."
        )
    if seconds.denominator != 1:
        raise IntervalError(
            f"Intervals are counted in whole seconds — {quote(text)} is "
            f"{float(seconds):g} seconds; pick a value that comes to whole seconds."
        )
    return int(seconds)


def format_interval(seconds: int) -> str:
    """The largest unit that divides evenly: 5400 → 90m, 90 → 90s, 86400 → 1d."""
    if seconds > 0:
        for unit, size in _LARGEST_FIRST:
            if seconds % size == 0:
                return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _format_minimum(seconds: int) -> str:
    # The contract states the default floor as "60s"; "1m" would also read like one month.
    return f"{seconds}s" if seconds < 120 else format_interval(seconds)
