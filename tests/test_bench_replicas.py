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
    assert sum(result["by_replicas"]["2"]["shards_per_beat"]) == 16  # every shard, once
    assert "ratio_2_over_1" in result
