"""Smoke test of the event-streams benchmark at a tiny size: it runs, and its figures are there.

Nothing is compared here (the numbers come from ``python -m bench``): five idle streams against
a real API server, on a private Redis and SQLite.
"""

from __future__ import annotations

from pathlib import Path

from support.private_redis import running_redis

from bench import streams
from bench.context import QUICK, BenchContext
from bench.goals import streams_rows


def test_the_streams_benchmark_counts_idle_sql_and_times_a_get(tmp_path: Path) -> None:
    with running_redis(tmp_path / "redis") as server:
        ctx = BenchContext(QUICK, server.url, tmp_path)
        result = streams.measure(ctx, 5, window_s=0.5, gets=10)
    assert result["streams"] == 5 and result["database"] == "sqlite"
    assert result["idle_sql_statements"] >= 0
    assert result["get_with_streams_s"]["requests"] == 10
    assert result["get_alone_s"]["p99"] > 0
    assert [row.met for row in streams_rows(result)] == [None, None]  # not at the goal's size
