"""Summaries of repeated measurements: every repetition is kept, the summary is derived."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of the repetitions, and the repetitions themselves."""
    if not values:
        return {"reps": [], "median": None, "min": None, "max": None}
    return {
        "reps": [round(v, 6) for v in values],
        "median": round(statistics.median(values), 6),
        "min": round(min(values), 6),
        "max": round(max(values), 6),
    }
