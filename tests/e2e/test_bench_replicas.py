"""Smoke test of the replicas benchmark at a tiny size, so it cannot rot (numbers not checked)."""

from __future__ import annotations

from pathlib import Path

from bench.replicas import measure_replicas


def test_replicas_benchmark_runs_and_claims_every_heartbeat_once(
    redis_url: str, redis_ns: str, tmp_path: Path
) -> None:
    result = measure_replicas(redis_url, tmp_path, 300, counts=(1, 2), reps=1, namespace=redis_ns)

    assert result["exactly_once"] is True
    assert [r["published"] for r in result["rounds"]] == [300, 300]
    two = result["by_replicas"]["2"]
    assert two["shards_per_beat"] == [8, 8]  # the balanced split of the 16 default shards
    assert result["every_shard_owned_once"] is True
    assert result["shard_balance"] == 1.0
    assert {"ratio_2_over_1", "cpu_ratio_2_over_1"} <= set(result)
    for figure in ("fires_per_s", "beat_cpu_s_total", "fires_per_beat_cpu_s"):
        assert two[figure]["median"] > 0  # measured, whatever the value
