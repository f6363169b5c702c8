"""The Redis-latency benchmark's parts: the delay line, the summary, its goal rows and plots.

Nothing is compared with a goal here (the figures come from ``python -m bench``); the tiny run
checks that a deployment behind the delay line delivers fires at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from support.private_redis import running_redis

from bench import redis_latency
from bench.context import QUICK, BenchContext
from bench.e2e import Plan, run_phases
from bench.e2e_systems import READY_TIMEOUT
from bench.goals_e2e import issue16_rows, latency_rows
from bench.latency_proxy import DelayProxy
from bench.plots_e2e import throughput_plot
from bench.plots_inflight import inflight_plot


@pytest.fixture
def server_url(tmp_path: Path) -> Iterator[str]:
    with running_redis(tmp_path / "redis") as server:
        yield server.url


def test_the_delay_line_adds_its_delay_each_way_and_keeps_pipelines_whole(
    server_url: str,
) -> None:
    upstream = redis.Redis.from_url(server_url)
    port = upstream.connection_pool.connection_kwargs["port"]
    proxy = DelayProxy(port, 0.2)
    client = redis.Redis(host="127.0.0.1", port=proxy.start())
    try:
        client.ping()  # the connection and its handshake
        began = time.monotonic()
        assert client.ping() is True
        assert time.monotonic() - began >= 0.4  # there and back
        pipe = client.pipeline(transaction=False)
        for i in range(50):
            pipe.set(f"k{i}", b"v" * 10_000)
        began = time.monotonic()
        assert pipe.execute() == [True] * 50
        # One round trip for the whole pipeline: the chunks overlap on the line.
        assert time.monotonic() - began < 0.4 * 10
        assert upstream.get("k49") == b"v" * 10_000
    finally:
        client.close()
        upstream.close()
        proxy.stop()


def _phase(rate: int, delivered: float, p99: float, workers_cpu: float) -> dict[str, Any]:
    return {
        "offered_per_s": rate,
        "delivered_per_s": delivered,
        "lag_s": {"p50": p99 / 2, "p99": p99},
        "cpu_s_per_fire": {"beat": 0.001, "workers": workers_cpu},
        "loadavg_1m": 1.5,
    }


def test_the_summary_and_its_goal_row_take_the_most_delivered_of_each() -> None:
    systems = {
        "direct": [_phase(100, 95.0, 0.1, 0.006), _phase(200, 140.0, 1.2, 0.007)],
        "+150ms": [_phase(100, 80.0, 1.5, 0.008), _phase(200, 60.0, 3.0, 0.009)],
    }
    out = redis_latency.summary(systems)
    assert out == {
        "throughput_per_s": {"direct": 140.0, "+150ms": 80.0},
        "ratio": 0.571,
        "workers_only_ratio": None,
        "no_task_events_ratio": None,
        "workers_only_no_hold_ratio": None,
        "ratio_at_offered": {"+150ms": {"100": 0.842, "200": 0.429}},
    }
    doc = {
        "parameters": {"delay_s_each_way": 0.15, "database": "postgresql"},
        "systems": systems,
        "goal_ratio": 0.5,
        **out,
    }
    [row] = latency_rows(doc)
    assert row.met is True
    assert row.goal.startswith("+150 ms of Redis latency each way")
    assert row.measured.startswith("0.57× (80/s with, 140/s without")


def test_issue_16_rows_compare_with_redbeat_at_100_and_200_per_second(tmp_path: Path) -> None:
    systems = {
        "ours-postgresql": [_phase(100, 100.0, 0.1, 0.003), _phase(200, 150.0, 1.2, 0.007)],
        "redbeat": [_phase(100, 100.0, 0.1, 0.002), _phase(200, 190.0, 0.1, 0.001)],
    }
    doc = {"systems": systems, "p99_passes_1s_at_offered": {"ours-postgresql": 200}}
    found = {row.goal: row for row in issue16_rows(doc)}
    cpu100 = found[
        "workers' CPU per heartbeat fire ≤ 2× celery-redbeat's empty task (100/s, PostgreSQL)"
    ]
    assert (cpu100.met, cpu100.measured) == (True, "1.5× (3.0 ms vs 2.0 ms; load 1.5/1.5)")
    delivered = [r for g, r in found.items() if g.startswith("delivered")]
    assert [r.met for r in delivered] == [True, False]
    passes = found["offered rate where p99 lag passes 1 s (redbeat; reported)"]
    assert (passes.met, passes.measured) == (None, "not passed up to 200/s offered")
    assert throughput_plot(systems, tmp_path / "t.png", "note").stat().st_size > 0


def test_the_inflight_plot_draws_the_points_and_the_goal(tmp_path: Path) -> None:
    point = {"turns": 8, "most_in_flight": 8, "rss_idle_mb": 100.0, "rss_peak_mb": 110.0}
    payload = {
        "profile": "quick",
        "started_at": "2026-12-03T00:00:00",
        "machine": {"loadavg": [1.0, 1.0, 1.0]},
        "result": {
            "model_delay_s": 2.0,
            "goal": {"in_flight": 200, "rss_mb": 300},
            "points": [point | {"threads_peak": 16}],
        },
    }
    assert inflight_plot(payload, tmp_path / "i.png").stat().st_size > 0


# One phase of each of the five deployments, one after the other. run_phases starts none that
# would end past the budget (the test then fails on the missing phase, with the run's note); one
# started within it is ready within READY_TIMEOUT or fails, then warms up, measures and stops
# (stop_all: 15 s, then SIGKILL). pytest's timeout follows from those bounds, so a loaded
# machine fails this test with the run's own message, never on the timeout.
TINY = Plan(rates=[5], kinds=["sqlite"], warmup_s=2.0, window_s=2.0, budget_s=240.0)
TINY_TIMEOUT_S = TINY.budget_s + READY_TIMEOUT + TINY.warmup_s + TINY.window_s + 15 + 30


@pytest.mark.timeout(TINY_TIMEOUT_S)
def test_a_tiny_run_behind_the_delay_line_delivers_fires(tmp_path: Path, server_url: str) -> None:
    ctx = BenchContext(QUICK, server_url, tmp_path, None)
    systems = redis_latency.systems(ctx, "sqlite", 0.02)
    results = run_phases(ctx, TINY, systems)
    for name in systems:
        assert len(results[name]) == 1, (name, ctx.notes)
        assert results[name][0]["fires"] > 0, name
