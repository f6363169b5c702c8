"""Jitter: a deterministic per-session offset so heartbeats set at the same moment fire apart.

The offset is a fraction of the schedule's period taken from a hash of the session id (SHA-256,
not Python's salted ``hash``: every process computes the same offset), capped at 10% of the
period and at 5 minutes, in whole seconds.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

MAX_FRACTION = 0.1
MAX_SECONDS = 300


def jitter_fraction(seed: str) -> float:
    """A number in [0, 1), the same for the same seed in every process."""
    digest = hashlib.sha256(seed.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def jitter_offset(seed: str, period_seconds: float) -> timedelta:
    """The offset for ``seed`` on a schedule repeating every ``period_seconds``; 0 without seed."""
    if not seed:
        return timedelta(0)
    cap = min(MAX_FRACTION * period_seconds, MAX_SECONDS)
    return timedelta(seconds=int(jitter_fraction(seed) * cap))
