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
