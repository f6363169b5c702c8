"""The jitter benchmark: without jitter every heartbeat (and cron job) set in one second is due
in one second."""

from __future__ import annotations

from bench.jitter_burst import measure
from hbgw.sessions.jitter import MAX_SECONDS


def test_jitter_spreads_a_burst_that_exact_times_concentrate() -> None:
    result = measure(3000)
    for label in ("every_1h", "every_15m", "cron_hourly"):
        assert result[label]["exact"] == {"largest_burst": 3000, "distinct_seconds": 1}
        spread = result[label]["jitter"]
        assert spread["largest_burst"] < 3000 // 20
        assert spread["distinct_seconds"] <= MAX_SECONDS


def test_jitter_spreads_cron_jobs_due_at_the_top_of_the_hour() -> None:
    result = measure(3000)["jobs"]
    for label in ("cron_hourly", "cron_top_of_hour", "every_1h"):
        assert result[label]["exact"] == {"largest_burst": 3000, "distinct_seconds": 1}
        spread = result[label]["jitter"]
        assert spread["largest_burst"] < 3000 // 20
        assert spread["distinct_seconds"] <= MAX_SECONDS
