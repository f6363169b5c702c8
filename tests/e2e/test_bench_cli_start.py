"""The start-up benchmark, once each and bounded: it runs and reports; no time is asserted."""

from __future__ import annotations

from pathlib import Path

from bench.cli_start import measure
from bench.goals import cli_start_rows


def test_the_benchmark_measures_each_command_and_fills_the_goals(
    tmp_path: Path, redis_url: str
) -> None:
    result = measure(tmp_path, redis_url, repeats=1)
    found = result["commands"]
    assert set(found) == {"help", "stamp_dir", "stamp_redis", "heartbeat_status_json"}
    for timing in found.values():
        assert timing["wall_s"]["median"] > 0 and timing["modules"] > 0
        assert timing["loadavg_1m"] >= 0
    # The import graph, not a time: no redis-py, SQLAlchemy, pydantic or Typer on the stamp's
    # short path; the status is a Typer command on the main path.
    for name in ("stamp_dir", "stamp_redis"):
        assert found[name]["heavy"] == [], name
    assert "typer" in found["heartbeat_status_json"]["heavy"]
    rows = cli_start_rows(result)
    assert len(rows) == 3 and [row.met is not None for row in rows] == [True, True, False]
