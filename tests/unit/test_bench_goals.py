"""The goals table reads the newest result of each benchmark and says met or not met."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.goals import markdown, rows


def median(value: float) -> dict[str, Any]:
    return {"median": value, "min": value, "max": value, "reps": [value]}


def write(results: Path, name: str, stamp: str, result: dict[str, Any]) -> None:
    (results / f"{name}-{stamp}.json").write_text(json.dumps({"result": result}))


def test_goals_come_from_the_newest_result_of_each_benchmark(tmp_path: Path) -> None:
    claim = {
        "ours": [{"scheduled": 1_000_000, "fires_per_s": median(120_000.0)}],
        "ratios": [{"ours_over_redbeat": 150.0, "same_size": True, "redbeat_scheduled": 10_000}],
    }
    write(tmp_path, "claim", "20260101T000000Z", {"ours": [], "ratios": []})  # older: ignored
    write(tmp_path, "claim", "20260102T000000Z", claim)
    write(
        tmp_path,
        "memory",
        "20260102T000000Z",
        {
            "ours_bytes_per_session": median(250.0),
            "redbeat_bytes_per_session": median(800.0),
        },
    )
    found = {row.goal: row for row in rows(tmp_path)}
    assert found["≥ 100,000 fires/s claimed and published by one beat"].met is True
    assert found["≥ 100× celery-redbeat's dispatch rate"].met is True
    memory = found["≤ 200 bytes of Redis per scheduled idle session"]
    assert (memory.met, memory.measured) == (False, "250 B (celery-redbeat 800 B)")
    assert found["(tick: no result yet)"].met is None
    table = markdown(list(found.values()))
    assert "| ≤ 200 bytes of Redis per scheduled idle session | 250 B" in table
    assert "**not met**" in table


def test_replica_goals_compare_claims_per_beat_cpu_second_and_the_shard_balance(
    tmp_path: Path,
) -> None:
    def beats(total: float, per_cpu: float, split: list[int]) -> dict[str, Any]:
        balance = min(split) / max(split)
        return {
            "fires_per_s": median(total),
            "fires_per_beat_cpu_s": median(per_cpu),
            "shards_per_beat": split,
            "shard_balance": balance,
        }

    by = {
        "1": beats(100_000.0, 150_000.0, [16]),
        "2": beats(150_000.0, 300_000.0, [8, 8]),
        "4": beats(160_000.0, 480_000.0, [4, 4, 4, 4]),
    }
    doc = {"by_replicas": by, "cpu_count": 2, "shard_balance": 1.0, "due_shards": 16}
    write(tmp_path, "replicas", "20260102T000000Z", doc)
    found = {row.goal: row for row in rows(tmp_path)}
    cpu = found["4 beats ≥ 3× one in claimed fires per beat CPU-second"]
    assert cpu.met is True and cpu.measured.startswith("3.20× (480,000 vs 150,000")
    assert "total 160,000/s vs 100,000/s on 2 cores" in cpu.measured
    balance = found["shard balance ≥ 0.8 (fewest shards per beat / most)"]
    assert balance.met is True and "1 beats 16; 2 beats 8/8; 4 beats 4/4/4/4" in balance.measured
