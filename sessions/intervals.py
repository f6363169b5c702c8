"""Interval grammar: ``10m``, ``every 90 minutes``, ``1.5h``."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from hbgw.errors import IntervalError

UNITS: dict[str, int] = {}
for _names, _seconds in (
    (("s", "sec", "secs", "second", "seconds"), 1),
    (("m", "min", "mins", "minute", "minutes"), 60),
    (("h", "hr", "hrs", "hour", "hours"), 3600),
    (("d", "day", "days"), 86400),
):
    for _name in _names:
        UNITS[_name] = _seconds

_PATTERN = re.compile(r"^\s*(?:every\s+)?(\d+(?:\.\d+)?|\.\d+)\s*([a-z]+)\s*$", re.IGNORECASE)
FORMS = "a number and a unit, such as 30s, 10m, 1.5h, 2d or 'every 90 minutes'"


def parse_interval(text: str, *, minimum: float = 60) -> int:
    """Whole seconds; below ``minimum`` is an error, never a silent clamp."""
    match = _PATTERN.match(text)
    if not match or match.group(2).lower() not in UNITS:
        raise IntervalError(f"'{text.strip()}' is not an interval — use {FORMS}.")
    try:
        total = Decimal(match.group(1)) * UNITS[match.group(2).lower()]
    except InvalidOperation as exc:
        raise IntervalError(f"'{text.strip()}' is not an interval — use {FORMS}.") from exc
    if total != total.to_integral_value():
        raise IntervalError(
            f"Intervals are counted in whole seconds; '{text.strip()}' is {total} seconds."
        )
    seconds = int(total)
    if seconds < minimum or seconds <= 0:
        raise IntervalError(f"Interval too small — minimum is {max(1, math.ceil(minimum))}s.")
    if seconds > 366 * 86400:
        raise IntervalError(f"'{text.strip()}' is longer than a year; use a cron schedule.")
    return seconds


def format_interval(seconds: int) -> str:
    """The largest unit that divides evenly: 5400 → 90m, 90 → 90s, 86400 → 1d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
