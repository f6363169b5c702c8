"""The end-to-end measurements, pure: fires in a steady window, their rate, lag percentiles.

A fire is ``(due, started)`` in epoch seconds: when the heartbeat was due and when its agent
turn started (``heartbeat_runs.due_at`` / ``started_at`` for ours, the message header and the
task's first line for redbeat). A fire counts in the window its start falls in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hdrh.histogram import HdrHistogram

Fire = tuple[float, float]

LAG_LOWEST_US = 1
LAG_HIGHEST_US = 3_600_000_000  # an hour: anything later is clamped (a stuck system)
LAG_DIGITS = 3


@dataclass(frozen=True)
class Window:
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end


def steady_window(first_due: float, warmup: float, length: float) -> Window:
    """The measured window: ``length`` seconds after ``warmup`` seconds from the first due time."""
    if warmup < 0 or length <= 0:
        raise ValueError(f"warm-up {warmup} s and window {length} s: need ≥ 0 and > 0")
    return Window(first_due + warmup, first_due + warmup + length)


def rows_to_fires(rows: Iterable[tuple[datetime | None, datetime | None]]) -> list[Fire]:
    """Ledger rows (due_at, started_at) to fires; runs that never started are not fires."""
    return [(due.timestamp(), started.timestamp()) for due, started in rows if due and started]


def in_window(fires: Iterable[Fire], window: Window) -> list[Fire]:
    return [f for f in fires if window.holds(f[1])]


def delivered_rate(fires: Sequence[Fire], window: Window) -> float:
    """Fires started per second in the window (``fires`` already in it)."""
    return len(fires) / window.seconds


def lags(fires: Iterable[Fire]) -> list[float]:
    """Seconds from due to start; a start a hair before its due time (clock rounding) is 0."""
    return [max(0.0, started - due) for due, started in fires]


def lag_summary(lag_s: Sequence[float]) -> dict[str, Any]:
    """p50, p95, p99 and max in seconds, through an HdrHistogram of microseconds."""
    if not lag_s:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None}
    hist = HdrHistogram(LAG_LOWEST_US, LAG_HIGHEST_US, LAG_DIGITS)
    for value in lag_s:
        hist.record_value(min(LAG_HIGHEST_US, max(LAG_LOWEST_US, round(value * 1e6))))
    out: dict[str, Any] = {"count": len(lag_s)}
    for name, pct in (("p50", 50.0), ("p95", 95.0), ("p99", 99.0)):
        out[name] = round(hist.get_value_at_percentile(pct) / 1e6, 4)
    out["max"] = round(hist.get_max_value() / 1e6, 4)
    return out


def per_fire(cpu_seconds: float, fires: int) -> float | None:
    return round(cpu_seconds / fires, 6) if fires else None


def rate_where_p99_passes(
    points: Sequence[tuple[float, float | None]], limit: float
) -> float | None:
    """The lowest offered rate whose p99 lag exceeds ``limit`` seconds; None when none does."""
    for offered, p99 in sorted(points):
        if p99 is not None and p99 > limit:
            return offered
    return None


def ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or theirs == 0:
        return None
    return round(ours / theirs, 3)
