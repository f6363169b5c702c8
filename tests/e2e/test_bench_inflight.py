"""Smoke test of the turns-in-flight benchmark at a tiny size: it runs, and its figures are there.

Nothing is compared here (the numbers come from ``python -m bench``): a real worker and beat
with the OpenAI-compatible agent against the benchmark's slow loopback model, on SQLite.
"""

from __future__ import annotations

from pathlib import Path

from support.private_redis import running_redis

from bench import inflight
from bench.context import QUICK, BenchContext
from bench.goals import inflight_rows


def test_the_inflight_benchmark_counts_calls_held_at_once_and_memory(tmp_path: Path) -> None:
    with running_redis(tmp_path / "redis") as server:
        ctx = BenchContext(QUICK, server.url, tmp_path)
        result = inflight.measure(ctx, [4], delay=0.5)
    [point] = result["points"]
    assert result["database"] == "sqlite"
    assert point["answered"] == point["sessions"] == 4
    assert 1 <= point["most_in_flight"] <= 4
    assert point["rss_peak_mb"] >= point["rss_idle_mb"] > 0
    assert [row.met for row in inflight_rows(result)] == [False]  # far below the goal's size
