"""The worker-scaling benchmark: its pure parts on tiny data, and one tiny real run (so it
cannot rot). Numbers are never checked against goals here, only that each is measured."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.context import QUICK, BenchContext, pg_url_if_up
from bench.workers_scaling import (
    Plan,
    _delta,
    costs_per_fire,
    marginal,
    phases_markdown,
    run_plan,
)
from hbgw.core.embedded import EmbeddedRedis


def _pg(**given: float) -> dict[str, object]:
    names = ("xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted")
    out: dict[str, object] = {name: given.get(name, 0.0) for name in names}
    # by pid: "2" exited in between (its seconds are lost), "3" started
    cpu = given.get("backend_cpu_s", 0.0)
    out["backend_cpu_s"] = {"1": 1.0 + cpu / 2, "3": cpu / 2} if cpu else {"1": 1.0, "2": 5.0}
    return out


def test_counters_subtract_and_costs_divide_by_fires() -> None:
    before = {
        "cpu": {"beat": 1.0, "w1": 2.0, "w2": 3.0},
        "redis": {
            "commands": {"get": 10, "info": 5},
            "net_in": 0,
            "net_out": 0,
            "cpu_s": 1.0,
        },
        "broker": {"commands": {"lpush": 1, "brpop": 0}, "net_in": 0, "net_out": 0, "cpu_s": 0.0},
        "pg": _pg(xact_commit=10.0),
    }
    after = {
        "cpu": {"beat": 1.5, "w1": 4.0, "w2": 5.0},
        "redis": {
            "commands": {"get": 35, "info": 9},
            "net_in": 500,
            "net_out": 500,
            "cpu_s": 1.2,
        },
        "broker": {"commands": {"lpush": 6, "brpop": 5}, "net_in": 50, "net_out": 0, "cpu_s": 0.1},
        "pg": _pg(xact_commit=60.0, tup_inserted=30.0, tup_updated=40.0, backend_cpu_s=0.1),
    }
    costs = costs_per_fire(_delta(before, after), 10, ["w1", "w2"])
    assert costs["beat_cpu_s"] == 0.05
    assert costs["worker_cpu_s"] == 0.4
    assert costs["redis_commands"] == 2.5  # INFO is the benchmark's own reading, left out
    assert costs["broker_messages"] == 0.5
    assert (costs["broker_commands"], costs["broker_bytes"], costs["broker_cpu_s"]) == (
        1.0,
        5.0,
        0.01,
    )
    assert costs["redis_bytes"] == 100.0
    assert costs["sql_transactions"] == 5.0
    assert costs["sql_tuples_written"] == 7.0
    assert costs["sql_cpu_s"] == 0.01
    assert costs_per_fire(_delta(before, after), 0, ["w1"])["worker_cpu_s"] is None


def test_the_marginal_cost_is_the_gross_less_the_idle_rate_over_the_window() -> None:
    per_fire = {"worker_cpu_s": 0.02, "beat_cpu_s": 0.001, "sql_cpu_s": None}
    idle = {"worker_cpu_s": 0.1, "beat_cpu_s": 0.5, "sql_cpu_s": 0.0}
    # 100 fires in 10 s: the idle workers spent 1 s (0.01 per fire), beat more than it used
    out = marginal(per_fire, idle, 10.0, 100)
    assert out == {"worker_cpu_s": 0.01, "beat_cpu_s": 0.0, "sql_cpu_s": None}
    assert marginal(per_fire, idle, 10.0, 0)["worker_cpu_s"] is None


@pytest.fixture
def bench_ctx(tmp_path: Path) -> Iterator[BenchContext]:
    # A Redis of its own: the benchmark flushes its database and reads the server's counters.
    with EmbeddedRedis(tmp_path / "redis") as server:
        yield BenchContext(QUICK, server.url, tmp_path, pg_url_if_up())


def test_a_tiny_run_measures_every_size_and_the_api_replicas(bench_ctx: BenchContext) -> None:
    plan = Plan(workers=[1, 2], rate=4, interval_s=2, warmup_s=1.0, window_s=2.5, api_clients=2)
    result = run_plan(bench_ctx, plan)
    assert [p["workers"] for p in result["phases"]] == [1, 2]
    for phase in result["phases"]:
        assert phase["fires"] > 0
        assert phase["fires_per_worker_cpu_s"] > 0
        assert phase["per_fire"]["redis_commands"] > 0
        assert len(phase["loadavg_1m"]) == 2
    assert result["phases"][-1]["per_fire"]["broker_messages"] > 0
    replicas = result["api"]["replicas"]
    assert len(replicas) == 2 and all(r["requests"] > 0 for r in replicas)
    table = phases_markdown(result)
    assert table.count("\n| ") == 3 and "requests per API CPU-second" in table  # head, 1, 2
    if bench_ctx.pg_url is not None:
        assert result["phases"][0]["per_fire"]["sql_transactions"] > 0
        assert result["sql_bytes_per_run"] > 0
