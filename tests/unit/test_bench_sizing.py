"""The sizing simulation: a pure function of costs per fire, read from the newest results."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.sizing import (
    DEFAULTS,
    Assumptions,
    costs_from_results,
    costs_markdown,
    markdown,
    plan,
    size_one,
)

CHEAP = replace(
    DEFAULTS,
    beat_cpu_s=1e-5,
    worker_cpu_s=0.001,
    redis_cpu_s=1e-5,
    broker_cpu_s=1e-5,
    sql_cpu_s=1e-5,
)


def test_fires_per_second_are_sessions_over_the_heartbeat() -> None:
    rows = plan(DEFAULTS)
    assert [r["fires_per_s"] for r in rows] == [3333.3, 33333.3, 333333.3]


def test_each_part_needs_its_fires_times_its_cost_over_the_utilisation() -> None:
    a = Assumptions(utilisation=0.5, worker_cores_per_host=10)
    row = size_one(3_000_000, replace(CHEAP, worker_cpu_s=0.01), a)  # 10,000 fires/s
    assert row["workers"] == 200  # 10,000 × 0.01 s ÷ 0.5
    assert row["worker_hosts"] == 20
    assert row["limit"] == "workers"


def test_a_cheap_deployment_fits_one_of_everything_but_two_beats() -> None:
    row = size_one(1_000_000, CHEAP, Assumptions())
    assert row["beats"] == 2  # one to take over
    assert (row["redis_primaries"], row["redis_cluster"]) == (1, False)
    assert row["broker"] == "one Redis"
    assert row["pg_primaries"] == 1
    assert row["shards"] == 16


def test_memory_alone_can_make_a_cluster() -> None:
    costs = replace(CHEAP, redis_bytes_per_session=1000.0)
    row = size_one(100_000_000, costs, Assumptions(redis_node_memory_gib=10, utilisation=0.5))
    assert row["redis_primaries"] == 19  # 93.1 GiB over 5 GiB a node
    assert row["redis_nodes"] == 38
    assert row["shards"] >= 4 * row["redis_primaries"]
    assert row["shards"] & (row["shards"] - 1) == 0  # a power of two


def test_partitions_follow_retention_and_the_sql_split() -> None:
    a = Assumptions(retention_days=30, partition_days=1, partitions_ahead=2)
    row = size_one(1_000_000, CHEAP, a)
    assert row["pg_partitions"] == 32 * 2  # per table: 30 kept + 2 ahead; runs and messages
    assert row["sql_gb_retained"] == round(3333.33 * 86_400 * CHEAP.sql_bytes_stored * 30 / 1e9)


def test_what_changes_from_one_size_to_the_next_is_said() -> None:
    costs = replace(CHEAP, redis_cpu_s=0.0005, broker_cpu_s=0.0005, sql_cpu_s=0.01)
    rows = plan(costs, Assumptions(), sizes=(100_000, 100_000_000))
    assert rows[0]["changes"] == []
    said = " ".join(rows[1]["changes"])
    assert "Redis Cluster" in said and "RabbitMQ" in said and "PostgreSQL primaries" in said
    table = markdown(rows)
    assert "0.1M sessions" in table and "100M sessions" in table and "what changes" in table


def _write(results: Path, name: str, result: dict[str, Any]) -> None:
    payload = {"benchmark": name, "started_at": "2026-12-02T18:00:00+00:00", "result": result}
    (results / f"{name}-20261202T180000Z.json").write_text(json.dumps(payload))


def test_costs_come_from_the_newest_results_and_say_where(tmp_path: Path) -> None:
    phases = [
        {"per_fire": {"worker_cpu_s": w, "broker_cpu_s": 0.0001, "sql_transactions": 5.0}}
        for w in (0.01, 0.03, 0.02)
    ]
    _write(tmp_path, "workers_scaling", {"phases": phases, "sql_bytes_per_run": 900.0})
    _write(tmp_path, "ledger_size", {"postgresql": {"bytes_per_fire": 700}})
    costs = costs_from_results(tmp_path)
    assert costs.worker_cpu_s == 0.02  # the median of the phases
    assert costs.broker_cpu_s == 0.0001
    assert costs.sources["redis_cpu_s"] == "default"  # not in those phases
    assert costs.sql_bytes_stored == 700.0  # the ledger benchmark's figure wins
    assert costs.sources["sql_bytes_stored"].startswith("ledger_size")
    assert costs.beat_cpu_s == DEFAULTS.beat_cpu_s
    assert costs.sources["beat_cpu_s"] == "default"


def test_no_results_means_every_default(tmp_path: Path) -> None:
    costs = costs_from_results(tmp_path)
    assert costs == DEFAULTS
    assert set(costs.sources.values()) == {"default"}
    table = costs_markdown(costs)
    assert "| worker_cpu_s | 25,000.0 µs | default |" in table
    assert "| sql_transactions | 5.00 | default |" in table
